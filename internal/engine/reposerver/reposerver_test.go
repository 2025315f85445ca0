package reposerver_test

import (
	"context"
	"testing"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// TestUntrackTakesOutWhatTheTrackingMethodWrites: the annotation under annotation tracking (the
// default), the instance label under label tracking, both under annotation+label; Git's own
// labels and annotations stay.
func TestUntrackTakesOutWhatTheTrackingMethodWrites(t *testing.T) {
	obj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName("c")
		u.SetLabels(map[string]string{"app.kubernetes.io/instance": "llm-prod", "tier": "gold"})
		u.SetAnnotations(map[string]string{reposerver.TrackingAnnotation: "llm-prod:/ConfigMap:ns/c", "team": "ml"})
		return u
	}
	for _, tc := range []struct {
		method              string
		labels, annotations map[string]string
	}{
		{method: "", labels: map[string]string{"app.kubernetes.io/instance": "llm-prod", "tier": "gold"}, annotations: map[string]string{"team": "ml"}},
		{method: "label", labels: map[string]string{"tier": "gold"}, annotations: map[string]string{reposerver.TrackingAnnotation: "llm-prod:/ConfigMap:ns/c", "team": "ml"}},
		{method: "annotation+label", labels: map[string]string{"tier": "gold"}, annotations: map[string]string{"team": "ml"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			o := obj()
			s, err := reposerver.SettingsFrom(context.Background(), map[string]string{"application.resourceTrackingMethod": tc.method})
			require.NoError(t, err)
			reposerver.Untrack([]*unstructured.Unstructured{o}, s)
			assert.Equal(t, tc.labels, o.GetLabels())
			assert.Equal(t, tc.annotations, o.GetAnnotations())
		})
	}
}

// TestSyncedRevisions: one per source, from status.sync.revision(s); none before a sync.
func TestSyncedRevisions(t *testing.T) {
	one := &v1alpha1.Application{Spec: v1alpha1.ApplicationSpec{Source: &v1alpha1.ApplicationSource{RepoURL: "r"}}}
	one.Status.Sync.Revision = "abc"
	assert.Equal(t, []string{"abc"}, reposerver.SyncedRevisions(one))
	multi := &v1alpha1.Application{Spec: v1alpha1.ApplicationSpec{Sources: v1alpha1.ApplicationSources{{RepoURL: "r"}, {RepoURL: "s", Ref: "values"}}}}
	assert.Equal(t, []string{"", ""}, reposerver.SyncedRevisions(multi), "before a sync")
	multi.Status.Sync.Revisions = []string{"abc", "def"}
	assert.Equal(t, []string{"abc", "def"}, reposerver.SyncedRevisions(multi))
}

// TestSettingsAsTheControllerReadsThem: Argo CD's defaults with an empty argocd-cm (annotation
// tracking, http(s) value files, every source type), and its keys read as it reads them.
func TestSettingsAsTheControllerReadsThem(t *testing.T) {
	s, err := reposerver.SettingsFrom(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "app.kubernetes.io/instance", s.AppLabelKey)
	assert.Equal(t, "annotation", s.TrackingMethod)
	assert.Equal(t, []string{"https", "http"}, s.Helm.ValuesFileSchemes)
	assert.Equal(t, map[string]bool{"Kustomize": true, "Helm": true, "Directory": true, "Plugin": true}, s.EnabledSourceTypes)

	s, err = reposerver.SettingsFrom(context.Background(), map[string]string{
		"kustomize.buildOptions": "--enable-helm", "kustomize.path.v5.4.3": "/custom/kustomize",
		"helm.valuesFileSchemes": "https", "helm.enable": "false", "installationID": "site-a",
	})
	require.NoError(t, err)
	assert.Equal(t, "--enable-helm", s.Kustomize.BuildOptions)
	require.Len(t, s.Kustomize.Versions, 1)
	assert.Equal(t, "v5.4.3", s.Kustomize.Versions[0].Name)
	assert.Equal(t, "/custom/kustomize", s.Kustomize.Versions[0].Path)
	assert.Equal(t, []string{"https"}, s.Helm.ValuesFileSchemes)
	assert.False(t, s.EnabledSourceTypes["Helm"])
	assert.Equal(t, "site-a", s.InstallationID)
}
