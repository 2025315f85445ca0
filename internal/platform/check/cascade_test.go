package check

import (
	"fmt"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	cascadeApp = `{apiVersion: argoproj.io/v1alpha1, kind: Application, metadata: {name: llm-prod, namespace: argocd, finalizers: [%s]}, spec: {source: {path: overlays/prod}}}`
	orphanApp  = `{apiVersion: argoproj.io/v1alpha1, kind: Application, metadata: {name: llm-prod, namespace: argocd}, spec: {source: {path: overlays/prod}}}`
	corpusPVC  = `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: qdrant-storage, namespace: llm-rag%s}}`
)

func TestCascadeStateful(t *testing.T) {
	keep := `, annotations: {argocd.argoproj.io/sync-options: "Delete=false,Prune=false"}`
	cases := []struct {
		name      string
		app, objs string
		want      []string // substrings, one per expected violation
	}{
		{"issue #15: the cascade finalizer over an unmarked claim",
			fmt.Sprintf(cascadeApp, "resources-finalizer.argocd.argoproj.io"), fmt.Sprintf(corpusPVC, ""),
			[]string{"Application argocd/llm-prod has the cascade finalizer resources-finalizer.argocd.argoproj.io and syncs PersistentVolumeClaim llm-rag/qdrant-storage, a PersistentVolumeClaim, without argocd.argoproj.io/sync-options: Delete=false"}},
		{"the foreground form cascades too",
			fmt.Sprintf(cascadeApp, "resources-finalizer.argocd.argoproj.io/foreground"),
			`{apiVersion: v1, kind: Namespace, metadata: {name: llm-rag, annotations: {argocd.argoproj.io/sync-options: Prune=false}}}`,
			[]string{"resources-finalizer.argocd.argoproj.io/foreground and syncs Namespace llm-rag, a Namespace"}},
		{"finalizer, but the claim is kept", fmt.Sprintf(cascadeApp, "resources-finalizer.argocd.argoproj.io"), fmt.Sprintf(corpusPVC, keep), nil},
		{"no finalizer: deleting the Application orphans", orphanApp, fmt.Sprintf(corpusPVC, ""), nil},
		{"another finalizer is not the cascade", fmt.Sprintf(cascadeApp, "example.com/other"), fmt.Sprintf(corpusPVC, ""), nil},
		{"nothing stateful", fmt.Sprintf(cascadeApp, "resources-finalizer.argocd.argoproj.io"),
			`{apiVersion: apps/v1, kind: Deployment, metadata: {name: rag-api, namespace: llm-api}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := cascadeStateful(parseObjects(t, tc.app), parseObjects(t, tc.objs))
			require.Len(t, got, len(tc.want), "violations: %+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "cascade-stateful", got[i].Rule)
				assert.Contains(t, got[i].Message, w)
			}
		})
	}
}

func TestSyncsPath(t *testing.T) {
	objs := parseObjects(t, `{apiVersion: argoproj.io/v1alpha1, kind: Application, metadata: {name: a}, spec: {sources: [{chart: x}, {path: overlays/prod/}]}}`)
	assert.True(t, syncsPath(objs[0], "overlays/prod"))
	assert.False(t, syncsPath(objs[0], "overlays/dev"))
}

// TestCheckCascadeStateful: HEAD's Applications have no cascade finalizer; putting it back on
// llm-prod passes while every stateful object is marked Delete=false, and fails naming the
// Application and the claim once the model cache loses the mark. The other envs' Applications
// do not sync overlays/prod: only prod fails this rule.
func TestCheckCascadeStateful(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("apps/prod/llm-prod.yaml", "  namespace: argocd\nspec:", "  namespace: argocd\n  finalizers:\n    - resources-finalizer.argocd.argoproj.io\nspec:")
	commit("llm-prod cascades again")
	res := runCheck(t, dir)
	for _, env := range res.Envs {
		assert.Empty(t, rulesOf(env.Violations, "cascade-stateful"), env.Env)
	}

	edit("components/model-cache/pvc.yaml", "    argocd.argoproj.io/sync-options: Delete=false,Prune=false\n", "")
	commit("model cache without Delete=false")
	res = runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		got := rulesOf(env.Violations, "cascade-stateful")
		if env.Env != "prod" {
			assert.Empty(t, got, env.Env)
			continue
		}
		require.Len(t, got, 1)
		assert.Equal(t, "PersistentVolumeClaim llm-inference/model-cache", got[0].Object)
		assert.Contains(t, got[0].Message, "Application argocd/llm-prod has the cascade finalizer")
	}
}

func rulesOf(vs []Violation, rule string) []Violation {
	var out []Violation
	for _, v := range vs {
		if v.Rule == rule {
			out = append(out, v)
		}
	}
	return out
}
