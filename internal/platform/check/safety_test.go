package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

func TestRetainStateful(t *testing.T) {
	const keep = `argocd.argoproj.io/sync-options: "Delete=false,Prune=false"`
	cases := []struct {
		name string
		obj  string
		want []string // substrings, one per expected violation
	}{
		{"PVC without sync-options (issue #15: the model cache)",
			`{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: model-cache, namespace: llm-inference}}`,
			[]string{"PersistentVolumeClaim llm-inference/model-cache is a PersistentVolumeClaim but its annotation argocd.argoproj.io/sync-options lacks Delete=false,Prune=false"}},
		{"PVC kept", `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: c, namespace: n, annotations: {` + keep + `}}}`, nil},
		{"other options kept alongside",
			`{apiVersion: v1, kind: Namespace, metadata: {name: llm-rag, annotations: {argocd.argoproj.io/sync-options: "ServerSideApply=true, Prune=false,Delete=false"}}}`, nil},
		{"Namespace with Prune=false only",
			`{apiVersion: v1, kind: Namespace, metadata: {name: llm-rag, annotations: {argocd.argoproj.io/sync-options: Prune=false}}}`,
			[]string{"Namespace llm-rag is a Namespace (deleting it deletes every claim in it) but its annotation argocd.argoproj.io/sync-options lacks Delete=false"}},
		{"CNPG Cluster with Delete=confirm",
			`{apiVersion: postgresql.cnpg.io/v1, kind: Cluster, metadata: {name: pgvector, namespace: llm-rag, annotations: {argocd.argoproj.io/sync-options: "Delete=confirm,Prune=false"}}}`,
			[]string{"Cluster llm-rag/pgvector is a CloudNativePG Cluster"}},
		{"StatefulSet with volumeClaimTemplates",
			`{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: qdrant, namespace: llm-rag}, spec: {volumeClaimTemplates: [{metadata: {name: storage}}]}}`,
			[]string{"StatefulSet llm-rag/qdrant is a StatefulSet with volumeClaimTemplates but its annotation argocd.argoproj.io/sync-options lacks Delete=false,Prune=false"}},
		{"StatefulSet that deletes its claims with it",
			`{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: qdrant, namespace: llm-rag, annotations: {` + keep + `}}, spec: {persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}, volumeClaimTemplates: [{metadata: {name: storage}}]}}`,
			[]string{"persistentVolumeClaimRetentionPolicy.whenDeleted: Delete"}},
		{"StatefulSet without claims is not stateful",
			`{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: web, namespace: n}, spec: {}}`, nil},
		{"a Deployment is not stateful", `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: n}}`, nil},
		{"a Cluster of another group is not CNPG's", `{apiVersion: example.com/v1, kind: Cluster, metadata: {name: c}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := retainStateful(parseObjects(t, tc.obj))
			require.Len(t, got, len(tc.want), "violations: %+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "stateful-retain", got[i].Rule)
				assert.Contains(t, got[i].Message, w)
			}
		})
	}
}

// TestCheckStatefulRetain drops the annotation of the model cache claim: check fails naming it.
func TestCheckStatefulRetain(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("components/model-cache/pvc.yaml", "    argocd.argoproj.io/sync-options: Delete=false,Prune=false\n", "")
	commit("model cache without Delete=false")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		var objs []string
		for _, v := range env.Violations {
			if v.Rule == "stateful-retain" {
				objs = append(objs, v.Object)
			}
		}
		assert.Equal(t, []string{"PersistentVolumeClaim llm-inference/model-cache"}, objs, env.Env)
	}
}

// runCheck checks HEAD (a change and its promotion, repoCopy) of the repository in dir.
func runCheck(t *testing.T, dir string) *Result {
	t.Helper()
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	// HEAD~1 is the change and HEAD its promotion (repoCopy): HEAD~2, before both, is where a
	// violation the change brings is not inherited in any env (dev follows the change at once).
	base := "HEAD~2"
	if _, err := repo.Resolve(base); err != nil { // the copy alone: its first commit
		base = "HEAD~1"
	}
	res, err := Run(repo, base, "HEAD")
	require.NoError(t, err)
	require.NotEmpty(t, res.Envs)
	require.Equal(t, "prod", res.Envs[0].Env, "prod first")
	return res
}
