package argocd

import (
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func decode(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &m))
	return &unstructured.Unstructured{Object: m}
}

func files(m map[string]string) func(rev, name string) ([]byte, error) {
	return func(_, name string) ([]byte, error) {
		if data, ok := m[name]; ok {
			return []byte(data), nil
		}
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
}

// TestOverrideFilesMergeAsArgoCDMergesThem: .argocd-source.yaml, then
// .argocd-source-<app>.yaml (what Argo CD Image Updater writes back), each a merge patch of the
// source; only the config management options are taken from them.
func TestOverrideFilesMergeAsArgoCDMergesThem(t *testing.T) {
	u := decode(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: api, namespace: argocd}
spec:
  source:
    repoURL: https://git.example.com/p.git
    path: charts/api
    targetRevision: main
    helm:
      releaseName: api
      parameters: [{name: replicas, value: "2"}]
  destination: {server: https://kubernetes.default.svc, namespace: llm-api}
`)
	a, err := FromUnstructured(u)
	require.NoError(t, err)
	got, err := a.WithOverrides(files(map[string]string{
		"charts/api/.argocd-source.yaml": "helm:\n  parameters:\n  - {name: image.tag, value: \"1.4.2\"}\n",
		// the app's own file is merged last; path and repository cannot be moved
		"charts/api/.argocd-source-api.yaml": "path: elsewhere\nrepoURL: https://evil.example.com/x.git\nhelm:\n  valuesObject: {tier: gold}\n",
	}))
	require.NoError(t, err)
	h := got.HelmOptions("abc", Cluster{})
	assert.Equal(t, "api", h.ReleaseName)
	require.Len(t, h.Parameters, 1, "a merge patch replaces the list: %+v", h.Parameters)
	assert.Equal(t, "image.tag", h.Parameters[0].Name)
	assert.Equal(t, "tier: gold\n", h.Values)
	assert.Equal(t, "charts/api", got.Path)
	assert.Equal(t, "https://git.example.com/p.git", got.RepoURL)
	assert.Len(t, a.HelmOptions("abc", Cluster{}).Parameters, 1, "the App it came from is unchanged")
	assert.Equal(t, "replicas", a.HelmOptions("abc", Cluster{}).Parameters[0].Name)

	// kustomize images, as the Image Updater writes them for a kustomize source
	a, err = FromUnstructured(application(t, `
  sync: {status: Synced, revision: aaa}
`))
	require.NoError(t, err)
	got, err = a.WithOverrides(files(map[string]string{
		"overlays/prod/.argocd-source-llm-prod.yaml": "kustomize:\n  images: [\"registry.example.com/llm/api:1.5.0\"]\n",
	}))
	require.NoError(t, err)
	k, err := got.KustomizeOptions("aaa")
	require.NoError(t, err)
	assert.Equal(t, []string{"registry.example.com/llm/api:1.5.0"}, k.Images)
	require.NoError(t, got.TypeError())

	// helm and kustomize options both: Argo CD refuses the source
	got, err = a.WithOverrides(files(map[string]string{
		"overlays/prod/.argocd-source.yaml": "kustomize: {namePrefix: x-}\nhelm: {releaseName: other}\n",
	}))
	require.NoError(t, err)
	assert.ErrorContains(t, got.TypeError(), "multiple application sources defined")
}

// TestSourcesAtTheirOwnRevisions: each source of a multi-source Application carries the revision
// its history entry synced; a history entry of another shape (a source added since) maps none.
func TestSourcesAtTheirOwnRevisions(t *testing.T) {
	spec := `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: api, namespace: argocd}
spec:
  sources:
  - {repoURL: https://git.example.com/p.git, path: charts/api, targetRevision: v1}
  - {repoURL: https://git.example.com/p.git, targetRevision: main, ref: values}
  destination: {server: https://kubernetes.default.svc}
status:
  sync: {status: Synced, revisions: [c1, c2]}
`
	a, err := FromUnstructured(decode(t, spec+`  history:
  - id: 1
    revisions: [s1, s2]
    sources:
    - {repoURL: https://git.example.com/p.git, path: charts/api, targetRevision: v1}
    - {repoURL: https://git.example.com/p.git, targetRevision: main, ref: values}
`))
	require.NoError(t, err)
	require.Len(t, a.Sources, 2)
	assert.Equal(t, []string{"s1", "s2"}, []string{a.Sources[0].SyncedRevision, a.Sources[1].SyncedRevision})
	assert.Equal(t, "values", a.Sources[1].Ref)

	a, err = FromUnstructured(decode(t, spec+`  history:
  - id: 1
    revisions: [s1]
    sources:
    - {repoURL: https://git.example.com/p.git, targetRevision: main, ref: values}
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"c1", "c2"}, []string{a.Sources[0].SyncedRevision, a.Sources[1].SyncedRevision},
		"a history of another shape: the revisions compared, by the spec's index")
}
