package release

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

const releaseFile = `# The release prod runs.
apiVersion: v1
kind: ConfigMap
metadata:
  name: release
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  revision: %s # pinned
  promotedFrom: staging
`

func releaseYAML(rev string) string { return strings.Replace(releaseFile, "%s", rev, 1) }

func TestSetTouchesOnlyTheValues(t *testing.T) {
	sha := strings.Repeat("a", 40)
	out, err := Set("prod", []byte(releaseYAML("main")), sha, "dev")
	require.NoError(t, err)
	want := strings.Replace(releaseYAML(sha), "promotedFrom: staging", "promotedFrom: dev", 1)
	assert.Equal(t, want, string(out))
	r, err := Parse("prod", out)
	require.NoError(t, err)
	assert.Equal(t, Release{Env: "prod", Revision: sha, PromotedFrom: "dev", Line: 9}, r)
	assert.True(t, r.Pinned())
}

func TestParseErrorsNameTheFile(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"not a ConfigMap", "kind: Secret\n", "apps/prod/release.yaml: want a ConfigMap"},
		{"no revision", "kind: ConfigMap\ndata: {}\n", "apps/prod/release.yaml: no data.revision"},
		{"not YAML", "kind: [\n", "apps/prod/release.yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("prod", []byte(tc.data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// platform is a bare repository with dev following main and staging and prod pinned to its
// first commit; work is a clone to commit from.
func platform(t *testing.T) (bare, work, first string) {
	t.Helper()
	bare = gittest.NewBare(t, t.TempDir(), "platform.git", map[string]string{
		"overlays/dev/kustomization.yaml":  "resources: []\n",
		"overlays/prod/kustomization.yaml": "resources: []\n",
		"apps/dev/release.yaml":            releaseYAML("main"),
		"apps/staging/release.yaml":        releaseYAML("main"),
		"apps/prod/release.yaml":           releaseYAML("main"),
	})
	work = gittest.Clone(t, bare)
	first = strings.TrimSpace(gittest.Run(t, work, "rev-parse", "HEAD"))
	for _, env := range []string{"staging", "prod"} {
		gittest.WriteFiles(t, work, map[string]string{File(env): releaseYAML(first)})
	}
	gittest.Run(t, work, "commit", "-qam", "pin staging and prod")
	gittest.Run(t, work, "push", "-q", "origin", "main")
	return bare, work, first
}

func commitBase(t *testing.T, work, msg string) string { return commitBaseOn(t, work, "main", msg) }

func TestPromoteMovesThePinByACommit(t *testing.T) {
	ctx := context.Background()
	bare, work, first := platform(t)
	change := commitBase(t, work, "a-base-change")
	remote, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: "file://" + bare})
	require.NoError(t, err)

	repo, err := remote.Open(ctx)
	require.NoError(t, err)
	// Until promoted, staging and prod run the first commit: the base change is not theirs.
	for _, env := range []string{"staging", "prod"} {
		rev, err := RevisionAt(repo, env, "main")
		require.NoError(t, err)
		assert.Equal(t, first, rev, env)
	}
	devRev, err := RevisionAt(repo, "dev", "main")
	require.NoError(t, err)
	assert.Equal(t, change, devRev, "dev follows main")

	// dev → staging takes main's head.
	req := Request{From: "dev", To: "staging"}
	plan, err := Resolve(repo, req)
	require.NoError(t, err)
	assert.Equal(t, Plan{From: "dev", To: "staging", Head: change, Old: first, New: change}, plan)
	res, err := Promote(ctx, remote, plan, req)
	require.NoError(t, err)
	require.NotEmpty(t, res.Commit)

	// staging → prod takes staging's pin, not main's head (a later commit on main stays out).
	later := commitBase(t, work, "a-later-change")
	require.NoError(t, repo.Fetch(ctx))
	req = Request{From: "staging", To: "prod"}
	plan, err = Resolve(repo, req)
	require.NoError(t, err)
	assert.Equal(t, change, plan.New)
	assert.NotEqual(t, later, plan.New)
	res, err = Promote(ctx, remote, plan, req)
	require.NoError(t, err)

	require.NoError(t, repo.Fetch(ctx))
	c, err := repo.CommitOf(res.Commit)
	require.NoError(t, err)
	assert.Equal(t, "promote staging → prod: "+gitrepo.Short(first)+" → "+gitrepo.Short(change), c.Subject)
	for key, want := range map[string]string{TrailerFrom: "staging", TrailerTo: "prod", TrailerRevision: change} {
		got, ok := c.Trailer(key)
		assert.True(t, ok, key)
		assert.Equal(t, want, got, key)
	}
	rev, err := RevisionAt(repo, "prod", "main")
	require.NoError(t, err)
	assert.Equal(t, change, rev)
	gittest.Fsck(t, bare)

	// git revert of the promotion is the rollback: prod runs the first commit again.
	gittest.Run(t, work, "pull", "-q", "--rebase")
	gittest.Run(t, work, "revert", "--no-edit", res.Commit)
	gittest.Run(t, work, "push", "-q", "origin", "main")
	require.NoError(t, repo.Fetch(ctx))
	rev, err = RevisionAt(repo, "prod", "main")
	require.NoError(t, err)
	assert.Equal(t, first, rev)
}

// TestPromoteRefusesAPinThatMovedSinceThePlan: two people promote from a plan each; the second
// commit would land on a diff nobody looked at, so it is refused.
func TestPromoteRefusesAPinThatMovedSinceThePlan(t *testing.T) {
	ctx := context.Background()
	bare, work, _ := platform(t)
	commitBase(t, work, "one")
	remote, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: "file://" + bare})
	require.NoError(t, err)
	repo, err := remote.Open(ctx)
	require.NoError(t, err)
	req := Request{From: "dev", To: "prod", SkipStage: true}
	stale, err := Resolve(repo, req)
	require.NoError(t, err)

	two := commitBase(t, work, "two")
	require.NoError(t, repo.Fetch(ctx))
	fresh, err := Resolve(repo, req)
	require.NoError(t, err)
	require.Equal(t, two, fresh.New)
	_, err = Promote(ctx, remote, fresh, req)
	require.NoError(t, err)

	_, err = Promote(ctx, remote, stale, req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pin moved to "+two)
	require.NoError(t, repo.Fetch(ctx))
	rev, err := RevisionAt(repo, "prod", "main")
	require.NoError(t, err)
	assert.Equal(t, two, rev, "the stale promotion changed nothing")
}

func TestResolveRefuses(t *testing.T) {
	ctx := context.Background()
	bare, work, back := platform(t)
	remote, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: "file://" + bare})
	require.NoError(t, err)
	// prod runs a later commit than the first, which is then an ancestor of its pin.
	two := commitBase(t, work, "two")
	repo, err := remote.Open(ctx)
	require.NoError(t, err)
	plan, err := Resolve(repo, Request{Revision: two, To: "prod", SkipStage: true})
	require.NoError(t, err)
	_, err = Promote(ctx, remote, plan, Request{Revision: two, To: "prod", SkipStage: true})
	require.NoError(t, err)
	gittest.Run(t, work, "pull", "-q", "--rebase", "origin", "main")
	// A commit on another branch, never merged.
	gittest.Run(t, work, "checkout", "-qb", "feature")
	side := commitBaseOn(t, work, "feature", "side")
	require.NoError(t, repo.Fetch(ctx))

	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"to an env that follows main", Request{From: "staging", To: "dev"}, "dev is not pinned"},
		{"from itself", Request{From: "prod", To: "prod"}, "same env"},
		{"from an env that does not exist", Request{From: "qa", To: "prod", SkipStage: true}, `no env "qa"`},
		{"a commit off the branch", Request{Revision: side, To: "prod", SkipStage: true}, "is not on main's history"},
		{"prod from dev", Request{From: "dev", To: "prod"}, "prod takes what staging runs, not dev (the promotion path is dev → staging → prod"},
		{"prod from a revision", Request{Revision: "main", To: "prod"}, "prod takes what staging runs, not revision main"},
		{"prod back to an ancestor", Request{Revision: back, To: "prod", SkipStage: true}, "would move prod back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(repo, tc.req)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func commitBaseOn(t *testing.T, work, branch, msg string) string {
	t.Helper()
	gittest.WriteFiles(t, work, map[string]string{filepath.ToSlash(filepath.Join("base", msg+".yaml")): "kind: ConfigMap\n"})
	gittest.Run(t, work, "add", "-A")
	gittest.Run(t, work, "commit", "-qm", msg)
	if branch == "main" {
		gittest.Run(t, work, "pull", "-q", "--rebase", "origin", "main")
	}
	gittest.Run(t, work, "push", "-q", "origin", branch)
	return strings.TrimSpace(gittest.Run(t, work, "rev-parse", "HEAD"))
}

func TestRevisionAtNamesAPinTheRepositoryLacks(t *testing.T) {
	bare, work, _ := platform(t)
	gittest.WriteFiles(t, work, map[string]string{File("prod"): releaseYAML(strings.Repeat("b", 40))})
	gittest.Run(t, work, "commit", "-qam", "pin prod to nothing")
	gittest.Run(t, work, "push", "-q", "origin", "main")
	repo, err := gitrepo.Open("file://" + bare)
	require.NoError(t, err)
	_, err = RevisionAt(repo, "prod", "main")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apps/prod/release.yaml:9 pins prod to "+strings.Repeat("b", 40)+", which the repository does not have")
}
