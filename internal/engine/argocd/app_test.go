package argocd

import (
	"testing"

	"github.com/llm-gitops/platform/internal/engine/render"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// application decodes an Application manifest with the given status.
func application(t *testing.T, status string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: llm-prod, namespace: argocd}
spec:
  source: {repoURL: https://git.example.com/p.git, path: overlays/prod, targetRevision: main}
  destination: {server: https://kubernetes.default.svc}
status:
`+status), &m))
	return &unstructured.Unstructured{Object: m}
}

// TestFromUnstructuredReadsWhatArgoCDRecorded: the synced revision is the newest history entry
// (not status.sync.revision, which runs ahead while a commit waits), the rendered source is the
// one synced, an operation under way or failed is named, and a comparison error leaves no verdict.
func TestFromUnstructuredReadsWhatArgoCDRecorded(t *testing.T) {
	cases := []struct {
		name, status                  string
		synced, path                  string
		inProgress, failed, statusErr bool
		resources                     map[string]string
	}{
		{name: "synced, compared at the same revision", status: `
  sync: {status: Synced, revision: aaa}
  reconciledAt: "2026-11-30T10:00:00Z"
  history: [{id: 1, revision: aaa, source: {repoURL: https://git.example.com/p.git, path: overlays/prod}}]
  resources: [{group: apps, kind: Deployment, namespace: ns, name: d, status: Synced}]`,
			synced: "aaa", path: "overlays/prod", resources: map[string]string{"apps/Deployment/ns/d": "Synced"}},
		{name: "a new commit compared, not synced", status: `
  sync: {status: OutOfSync, revision: bbb}
  reconciledAt: "2026-11-30T10:00:00Z"
  history: [{id: 1, revision: aaa, source: {repoURL: https://git.example.com/p.git, path: overlays/prod}}]
  resources: [{group: apps, kind: Deployment, namespace: ns, name: d, status: OutOfSync}]`,
			synced: "aaa", path: "overlays/prod", resources: map[string]string{"apps/Deployment/ns/d": "OutOfSync"}},
		{name: "a sync under way", status: `
  sync: {status: OutOfSync, revision: bbb}
  history: [{id: 1, revision: aaa, source: {repoURL: https://git.example.com/p.git, path: overlays/prod}}]
  operationState: {phase: Running, operation: {sync: {revision: bbb}}, startedAt: "2026-11-30T10:00:00Z"}`,
			synced: "aaa", path: "overlays/prod", inProgress: true},
		{name: "a sync failed part way", status: `
  sync: {status: OutOfSync, revision: bbb}
  history: [{id: 1, revision: aaa, source: {repoURL: https://git.example.com/p.git, path: overlays/prod}}]
  operationState: {phase: Failed, message: boom, operation: {sync: {revision: bbb}}, syncResult: {revision: bbb}, startedAt: "2026-11-30T10:00:00Z"}`,
			synced: "aaa", path: "overlays/prod", failed: true},
		{name: "rolled back to an entry with another path", status: `
  sync: {status: OutOfSync, revision: ccc}
  history:
    - {id: 1, revision: aaa, source: {repoURL: https://git.example.com/p.git, path: overlays/prod-old}}`,
			synced: "aaa", path: "overlays/prod-old"},
		{name: "no history yet: the succeeded operation", status: `
  sync: {status: Synced, revision: aaa}
  operationState: {phase: Succeeded, operation: {sync: {revision: aaa}}, syncResult: {revision: aaa}, startedAt: "2026-11-30T10:00:00Z"}`,
			synced: "aaa", path: "overlays/prod"},
		{name: "Argo CD could not compare", status: `
  sync: {status: Unknown, revision: aaa}
  reconciledAt: "2026-11-30T10:00:00Z"
  history: [{id: 1, revision: aaa, source: {repoURL: https://git.example.com/p.git, path: overlays/prod}}]
  conditions: [{type: ComparisonError, message: "rpc error"}]
  resources: []`,
			synced: "aaa", path: "overlays/prod", statusErr: true, resources: map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app, err := FromUnstructured(application(t, tc.status))
			require.NoError(t, err)
			assert.Equal(t, tc.synced, app.SyncedRevision)
			assert.Equal(t, tc.path, app.Path)
			assert.Equal(t, tc.inProgress, app.InProgress(), "in progress")
			assert.Equal(t, tc.failed, app.Failed(), "failed")
			if tc.resources == nil {
				assert.Nil(t, app.Status)
				return
			}
			require.NotNil(t, app.Status)
			assert.Equal(t, tc.resources, app.Status.Resources)
			assert.Equal(t, tc.statusErr, app.Status.Error != "", "error %q", app.Status.Error)
		})
	}
}

// TestKustomizePatchesAreTheSyncedSources: the patches the audit renders with are those of the
// source Argo CD last synced (history), not a spec edited since; other kustomize options are named.
func TestKustomizePatchesAreTheSyncedSources(t *testing.T) {
	u := application(t, `
  sync: {status: OutOfSync, revision: bbb}
  history:
  - id: 1
    revision: aaa
    source:
      repoURL: https://git.example.com/p.git
      path: overlays/prod
      kustomize:
        patches:
        - target: {kind: HorizontalPodAutoscaler, name: rag-api}
          patch: '[{"op":"replace","path":"/spec/minReplicas","value":6}]'
`)
	require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"namePrefix": "x-"}, "spec", "source", "kustomize"))
	a, err := FromUnstructured(u)
	require.NoError(t, err)
	assert.Equal(t, []map[string]any{{
		"target": map[string]any{"kind": "HorizontalPodAutoscaler", "name": "rag-api"},
		"patch":  `[{"op":"replace","path":"/spec/minReplicas","value":6}]`,
	}}, a.KustomizePatches)
	assert.Empty(t, a.KustomizeUnsupported, "the synced source has no other option")
	k, err := a.KustomizeOptions("aaa")
	require.NoError(t, err)
	assert.Nil(t, k, "the synced source's options, not the spec's namePrefix")

	unsynced := application(t, `
  sync: {status: OutOfSync, revision: bbb}
`)
	require.NoError(t, unstructured.SetNestedField(unsynced.Object, map[string]any{"namePrefix": "x-",
		"images": []any{"api=registry.example.com/api:$ARGOCD_APP_REVISION_SHORT"}, "kubeVersion": "1.30"}, "spec", "source", "kustomize"))
	a, err = FromUnstructured(unsynced)
	require.NoError(t, err)
	assert.Nil(t, a.KustomizePatches)
	assert.Equal(t, []string{"kubeVersion"}, a.KustomizeUnsupported, "what the auditor does not apply")
	k, err = a.KustomizeOptions("bbb1234567")
	require.NoError(t, err)
	assert.Equal(t, &render.KustomizeOptions{NamePrefix: "x-", Images: []string{"api=registry.example.com/api:bbb1234"}}, k,
		"the build environment substituted as Argo CD does")
}

// TestRendersAsSaysWhetherTheSyncedSourceIsGits: the source Argo CD synced (its history entry) is
// Git's manifest, empty lists Git writes and the history drops included; another value, an
// ignoreDifferences added by hand, or a source not synced yet is not.
func TestRendersAsSaysWhetherTheSyncedSourceIsGits(t *testing.T) {
	git := func(t *testing.T, helm string) *App {
		t.Helper()
		u := application(t, "")
		unstructured.RemoveNestedField(u.Object, "status")
		var h map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(helm), &h))
		require.NoError(t, unstructured.SetNestedField(u.Object, h, "spec", "source", "helm"))
		a, err := FromUnstructured(u)
		require.NoError(t, err)
		return a
	}
	live := func(t *testing.T, historyHelm string, edit func(*unstructured.Unstructured)) *App {
		t.Helper()
		u := application(t, `
  sync: {status: Synced, revision: aaa}
  history:
  - id: 1
    revision: aaa
    source:
      repoURL: https://git.example.com/p.git
      path: overlays/prod
      targetRevision: main
      helm: `+historyHelm)
		var h map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(historyHelm), &h))
		require.NoError(t, unstructured.SetNestedField(u.Object, h, "spec", "source", "helm"))
		if edit != nil {
			edit(u)
		}
		a, err := FromUnstructured(u)
		require.NoError(t, err)
		return a
	}
	cases := []struct {
		name      string
		git, live *App
		rendersAs bool
	}{
		{"the same values", git(t, "{valuesObject: {tier: gold}}"), live(t, "{valuesObject: {tier: gold}}", nil), true},
		{"empty lists in Git, dropped by the history", git(t, "{valueFiles: [], parameters: [], valuesObject: {tier: gold}}"),
			live(t, "{valuesObject: {tier: gold}}", nil), true},
		{"another value synced", git(t, "{valuesObject: {tier: gold}}"), live(t, "{valuesObject: {tier: bronze}}", nil), false},
		{"an ignoreDifferences added by hand", git(t, "{valuesObject: {tier: gold}}"), live(t, "{valuesObject: {tier: gold}}", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"kind": "ConfigMap", "jsonPointers": []any{"/data"}}}, "spec", "ignoreDifferences"))
		}), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.rendersAs, tc.live.RendersAs(tc.git))
		})
	}
}

// TestSyncedAsComparesEverySource: a multi-source Application synced again at another revision of
// its value source (the one not audited first) was not synced as before; a refresh that compared
// the same revision is compared as before, a comparison at another revision or failing is not.
func TestSyncedAsComparesEverySource(t *testing.T) {
	multi := func(t *testing.T, values, compared, condition string) *App {
		t.Helper()
		u := application(t, `
  sync: {status: Synced, revisions: [aaa, `+compared+`]}
  reconciledAt: "2026-11-30T10:00:00Z"
  resources: []
  conditions: [`+condition+`]
  history:
  - id: 1
    revisions: [aaa, `+values+`]
    sources:
    - {repoURL: https://git.example.com/p.git, path: overlays/prod, targetRevision: main}
    - {repoURL: https://git.example.com/p.git, targetRevision: values, ref: values}`)
		unstructured.RemoveNestedField(u.Object, "spec", "source")
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"repoURL": "https://git.example.com/p.git", "path": "overlays/prod", "targetRevision": "main"},
			map[string]any{"repoURL": "https://git.example.com/p.git", "targetRevision": "values", "ref": "values"},
		}, "spec", "sources"))
		a, err := FromUnstructured(u)
		require.NoError(t, err)
		return a
	}
	before := multi(t, "bbb", "bbb", "")
	require.Equal(t, "aaa", before.SyncedRevision, "the source audited first")
	assert.True(t, multi(t, "bbb", "bbb", "").SyncedAs(before), "a refresh")
	assert.False(t, multi(t, "ccc", "ccc", "").SyncedAs(before), "the value source synced at ccc")
	assert.True(t, multi(t, "bbb", "bbb", "").ComparedAs(before))
	assert.False(t, multi(t, "bbb", "bbb", `{type: ComparisonError, message: "rpc error"}`).ComparedAs(before), "Argo CD could not compare")
}
