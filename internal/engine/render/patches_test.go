package render

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

func hpaMin(t *testing.T, res *Result) int64 {
	t.Helper()
	for _, o := range res.Objects {
		if o.GetKind() == "HorizontalPodAutoscaler" && o.GetName() == "rag-api" {
			v, _, _ := unstructured.NestedInt64(o.Object, "spec", "minReplicas")
			return v
		}
	}
	t.Fatal("no HPA rag-api")
	return 0
}

// TestWithPatchesAsArgoCDBuilds: an Application's kustomize patch is appended to the overlay's
// patches (after its own, so it wins); the repository's files are untouched, and the cache keeps
// the patched render apart from the plain one at the same commit.
func TestWithPatchesAsArgoCDBuilds(t *testing.T) {
	repo, err := gitrepo.Open("../../..")
	require.NoError(t, err)
	snap, err := repo.Snapshot("HEAD")
	require.NoError(t, err)
	src, err := FromSnapshot(snap)
	require.NoError(t, err)
	patches := []Patch{{
		"target": map[string]any{"kind": "HorizontalPodAutoscaler", "name": "rag-api"},
		"patch":  `[{"op":"replace","path":"/spec/minReplicas","value":6}]`,
	}}
	c := NewCache("", 4)

	plain, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
	require.NoError(t, err)
	patchedSrc, err := src.WithPatches("prod", patches)
	require.NoError(t, err)
	patched, err := Engine{Cache: c}.Render(context.Background(), patchedSrc, Target{Name: "prod"})
	require.NoError(t, err)
	assert.Equal(t, int64(3), hpaMin(t, plain))
	assert.Equal(t, int64(6), hpaMin(t, patched))
	assert.Equal(t, snap.Revision, patched.Revision, "a patched render is of the same commit")
	assert.NotEqual(t, plain.Digest, patched.Digest)

	// Again, through the cache by revision: each gets its own.
	again, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
	require.NoError(t, err)
	assert.Equal(t, int64(3), hpaMin(t, again))
	key, err := CacheRevision(snap.Revision, Variant{Patches: patches})
	require.NoError(t, err)
	hit, ok := c.ByRevision("prod", key)
	require.True(t, ok)
	assert.Equal(t, int64(6), hpaMin(t, hit))
	assert.Equal(t, snap.Revision, hit.Revision)
}
