package schedule

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// pinnedProd is the project with apps/ and prod pinned to the repository's first commit.
func pinnedProd(t *testing.T) (bare, first string) {
	t.Helper()
	files := projectFiles(t)
	for _, dir := range []string{"apps/prod", "apps/common"} {
		entries, err := os.ReadDir(filepath.Join(projectRoot, dir))
		require.NoError(t, err)
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(projectRoot, dir, e.Name()))
			require.NoError(t, err)
			files[dir+"/"+e.Name()] = string(data)
		}
	}
	bare = newBare(t, files)
	work := clone(t, bare)
	first = strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	data, err := os.ReadFile(filepath.Join(work, release.File("prod")))
	require.NoError(t, err)
	pinned, err := release.Set("prod", data, first, "staging")
	require.NoError(t, err)
	writeFiles(t, work, map[string]string{release.File("prod"): string(pinned)})
	gitOut(t, work, "commit", "-q", "-am", "pin prod")
	gitOut(t, work, "push", "-q", "origin", "HEAD:main")
	return bare, first
}

// renderProd renders prod as Argo CD builds it from main: at its pin, with its Application's
// kustomize patches.
func renderProd(t *testing.T, bare string) []*unstructured.Unstructured {
	t.Helper()
	repo, err := gitrepo.Open("file://" + bare)
	require.NoError(t, err)
	runs, err := release.At(repo, "prod", "main")
	require.NoError(t, err)
	snap, err := repo.Snapshot(runs.Revision)
	require.NoError(t, err)
	src, err := render.FromSnapshot(snap)
	require.NoError(t, err)
	src, err = src.WithPatches("prod", runs.Patches)
	require.NoError(t, err)
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	require.NoError(t, err)
	return res.Objects
}

func minReplicas(t *testing.T, objs []*unstructured.Unstructured, kind, name string) int64 {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			v, _, _ := unstructured.NestedInt64(o.Object, "spec", "minReplicas")
			return v
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return 0
}

// TestFirePinnedEnvPatchesItsApplication: prod is pinned, so a commit to overlays/prod on main
// would not reach it. The scale-up goes into llm-prod's kustomize patches (apps/prod, read from
// main), a render as Argo CD builds it has the warm floor, and the scale-down removes the patch.
func TestFirePinnedEnvPatchesItsApplication(t *testing.T) {
	ctx := context.Background()
	bare, _ := pinnedProd(t)
	before := headSnapshot(t, bare)
	s := loadProd(t, bare)
	fire := futureFiring(t, s, "payday")
	remote := fileRemote(t, bare)
	require.Equal(t, int64(3), minReplicas(t, renderProd(t, bare), "HorizontalPodAutoscaler", "rag-api"))

	plan := s.Describe(s.FiringAt(s.Peak("payday"), fire), before)
	assert.Equal(t, "apps/prod/llm-prod.yaml", plan.Change.File, "the plan names where the commit goes")
	require.NotNil(t, plan.Change.From)
	assert.Equal(t, int64(3), *plan.Change.From)

	up, err := s.Fire(ctx, remote, "payday", fire, FireOptions{Author: bot})
	require.NoError(t, err)
	require.NotEmpty(t, up.Commit)
	assert.Equal(t, int64(3), up.From)
	assert.Equal(t, "apps/prod/llm-prod.yaml", up.File, "the commit's file")
	assert.Equal(t, int64(6), up.To)

	after := headSnapshot(t, bare)
	assert.Equal(t, string(before.Files["overlays/prod/scaling.yaml"]), string(after.Files["overlays/prod/scaling.yaml"]), "the overlay is pinned: not the place")
	app := string(after.Files["apps/prod/llm-prod.yaml"])
	assert.Contains(t, app, `patch: '[{"op":"replace","path":"/spec/minReplicas","value":6}]'`)
	// Only lines were added: the rest of the file (comments included) is as it was.
	for _, line := range strings.Split(string(before.Files["apps/prod/llm-prod.yaml"]), "\n") {
		assert.Contains(t, app, line)
	}
	assert.Equal(t, int64(6), minReplicas(t, renderProd(t, bare), "HorizontalPodAutoscaler", "rag-api"))

	// Firing again finds the commit.
	again, err := s.Fire(ctx, remote, "payday", fire, FireOptions{Author: bot})
	require.NoError(t, err)
	assert.True(t, again.NoChange, again.Reason)

	down, err := s.ScaleDown(ctx, remote, "payday", fire, FireOptions{Author: bot})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(down.Reason, "restored 3"), down.Reason)
	assert.Equal(t, string(before.Files["apps/prod/llm-prod.yaml"]), string(headSnapshot(t, bare).Files["apps/prod/llm-prod.yaml"]))
	assert.Equal(t, int64(3), minReplicas(t, renderProd(t, bare), "HorizontalPodAutoscaler", "rag-api"))
	fsck(t, bare)
}

// TestOverlappingPeaksOfAPinnedEnvLeaveNoPatch: two peaks fire (their patches on adjacent lines),
// then end in the order that makes each revert conflict; each scale-down removes its own patch,
// so after both the Application is as it was and prod runs its pin's values (a promotion of
// those fields is not masked by a leftover patch).
func TestOverlappingPeaksOfAPinnedEnvLeaveNoPatch(t *testing.T) {
	ctx := context.Background()
	bare, _ := pinnedProd(t)
	before := string(headSnapshot(t, bare).Files["apps/prod/llm-prod.yaml"])
	s := loadProd(t, bare)
	remote := fileRemote(t, bare)
	morning, payday := futureFiring(t, s, "weekday-morning"), futureFiring(t, s, "payday")
	_, err := s.Fire(ctx, remote, "weekday-morning", morning, FireOptions{Author: bot})
	require.NoError(t, err)
	_, err = s.Fire(ctx, remote, "payday", payday, FireOptions{Author: bot})
	require.NoError(t, err)
	assert.Equal(t, int64(6), minReplicas(t, renderProd(t, bare), "HorizontalPodAutoscaler", "rag-api"))

	down, err := s.ScaleDown(ctx, remote, "weekday-morning", morning, FireOptions{Author: bot})
	require.NoError(t, err)
	require.NotEmpty(t, down.Commit, down.Reason)
	app := string(headSnapshot(t, bare).Files["apps/prod/llm-prod.yaml"])
	assert.NotContains(t, app, "vllm-qwen}", "the morning's patch is gone")
	assert.Contains(t, app, "name: rag-api}", "payday's patch stays while payday runs")
	assert.Equal(t, int64(6), minReplicas(t, renderProd(t, bare), "HorizontalPodAutoscaler", "rag-api"))

	down, err = s.ScaleDown(ctx, remote, "payday", payday, FireOptions{Author: bot})
	require.NoError(t, err)
	require.NotEmpty(t, down.Commit, down.Reason)
	assert.Equal(t, before, string(headSnapshot(t, bare).Files["apps/prod/llm-prod.yaml"]), "no patch left behind")
	assert.Equal(t, int64(3), minReplicas(t, renderProd(t, bare), "HorizontalPodAutoscaler", "rag-api"))
	fsck(t, bare)
}
