package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/release"
)

// TestTrackingABranchIsRejected: staging's and prod's releases name main instead of a commit,
// and their Applications' targetRevision with them; the check names the release file and the
// Applications of each.
func TestTrackingABranchIsRejected(t *testing.T) {
	dir, _, _ := repoCopy(t)
	for _, env := range []string{"staging", "prod"} {
		p := filepath.Join(dir, release.File(env))
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out, err := release.Set(env, data, "main", "")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, out, 0o644))
	}
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
