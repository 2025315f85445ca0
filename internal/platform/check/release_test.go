package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// TestTrackingABranchIsRejected: staging's and prod's releases name main instead of a commit,
// and their Applications' targetRevision with them; the check names the release file and the
// Applications of each.
func TestTrackingABranchIsRejected(t *testing.T) {
	dir, _, _ := repoCopy(t)
	setRelease(t, dir, "main", "staging", "prod")
	gitOut(t, dir, "commit", "-qam", "staging and prod follow main")

	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		got := rulesOf(env.Violations, "release-pinned")
		if env.Env == "dev" {
			assert.Empty(t, got)
			continue
		}
		var objects []string
		for _, v := range got {
			objects = append(objects, v.Object)
			assert.Contains(t, v.Message, `"main"`, v.Object)
		}
		assert.ElementsMatch(t, []string{"apps/" + env.Env + "/release.yaml", "Application argocd/llm-" + env.Env, "Application argocd/llm-policies"}, objects, env.Env)
	}
}

// TestBaseChangeReachesProdOnlyByPromotion: a change of base/ on main changes dev at once and
// prod not at all; the promotion commit that moves prod's pin is where prod's diff shows it.
func TestBaseChangeReachesProdOnlyByPromotion(t *testing.T) {
	dir, _, edit := repoCopy(t)
	edit("base/api/rag-api.yaml", "name: QDRANT_URL", "name: QDRANT_ENDPOINT")
	gitOut(t, dir, "commit", "-qam", "rename an env var in base")
	change := strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD"))

	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	changed := func(res *Result, env string) []string {
		for _, e := range res.Envs {
			if e.Env == env {
				var out []string
				for _, c := range e.Changes {
					out = append(out, c.Kind+" "+c.Name)
				}
				return out
			}
		}
		t.Fatalf("no env %s", env)
		return nil
	}
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.Contains(t, changed(res, "dev"), "Deployment rag-api")
	assert.Empty(t, changed(res, "prod"), "a base change reached prod without a promotion")
	assert.Empty(t, changed(res, "staging"))

	pinAll(t, dir, change)
	gitOut(t, dir, "commit", "-qam", "promote")
	res, err = Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.Contains(t, changed(res, "prod"), "Deployment rag-api")
	assert.Empty(t, changed(res, "dev"), "the promotion commit changes nothing dev runs")
	for _, e := range res.Envs {
		if e.Env == "prod" {
			assert.Equal(t, change, e.Revision)
		}
	}
}

// TestUnpromotedPathsToProdAreRejected: what reaches prod from main without a promotion is named:
// a kustomize patch in llm-prod that is not a scheduled scale-up, an Application that syncs the
// platform repository at a branch through spec.sources or under another spelling of its URL; and
// a change of apps/common shows in prod's apps diff. A scheduled scale-up's patch passes.
func TestUnpromotedPathsToProdAreRejected(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("apps/prod/llm-prod.yaml", "    path: overlays/prod\n", `    path: overlays/prod
    kustomize:
      patches:
        - target: {kind: HorizontalPodAutoscaler, name: rag-api}
          patch: '[{"op":"replace","path":"/spec/minReplicas","value":6}]'
        - target: {kind: StatefulSet, name: qdrant}
          patch: '[{"op":"replace","path":"/spec/replicas","value":0}]'
`)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apps/prod/sneaky.yaml"), []byte(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: sneaky-rag, namespace: argocd}
spec:
  project: llm-prod
  sources:
    - {repoURL: https://git.example.com/platform/llm-gitops, targetRevision: main, path: base/rag}
  destination: {server: https://kubernetes.default.svc, namespace: llm-rag}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: sneaky-api, namespace: argocd}
spec:
  project: llm-prod
  source: {repoURL: https://GIT.example.com/platform/llm-gitops/, targetRevision: main, path: base/api}
  destination: {server: https://kubernetes.default.svc, namespace: llm-api}
`), 0o644))
	edit("apps/prod/kustomization.yaml", "  - release.yaml", "  - release.yaml\n  - sneaky.yaml")
	edit("apps/common/gpu-operator.yaml", "targetRevision: v26.7.0", "targetRevision: v27.1.0")
	commit("unpromoted changes to prod")

	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD~2", "HEAD")
	require.NoError(t, err)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		if env.Env != "prod" {
			continue
		}
		var objects []string
		for _, v := range append(rulesOf(env.Violations, "release-pinned"), rulesOf(env.Violations, "release-patches")...) {
			objects = append(objects, v.Rule+" "+v.Object)
		}
		assert.ElementsMatch(t, []string{
			"release-patches Application llm-prod spec.source.kustomize.patches[1]",
			"release-pinned Application argocd/sneaky-rag",
			"release-pinned Application argocd/sneaky-api",
		}, objects, "%+v", env.Violations)
		var apps []string
		for _, c := range env.Apps {
			apps = append(apps, c.Change+" "+c.Kind+" "+c.Name)
		}
		assert.Contains(t, apps, "changed Application gpu-operator", "apps/common reaches prod from main: it shows")
		assert.Contains(t, apps, "changed Application llm-prod")
	}
}

// TestPinOffTheBranchIsRejected: prod's release names a commit that was never merged to main.
func TestPinOffTheBranchIsRejected(t *testing.T) {
	dir, _, edit := repoCopy(t)
	gitOut(t, dir, "checkout", "-qb", "side")
	edit("base/api/rag-api.yaml", "name: QDRANT_URL", "name: QDRANT_ENDPOINT")
	gitOut(t, dir, "commit", "-qam", "unmerged")
	side := strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD"))
	gitOut(t, dir, "checkout", "-q", "main")
	setRelease(t, dir, side, "prod")
	gitOut(t, dir, "commit", "-qam", "pin prod to an unmerged commit")

	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		if env.Env == "prod" {
			got := rulesOf(env.Violations, "release-pinned")
			require.Len(t, got, 1, "%+v", env.Violations)
			assert.Contains(t, got[0].Message, "is not on the history of")
		}
	}
}
