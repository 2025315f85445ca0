package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// envOf returns the named env's result.
func envOf(t *testing.T, res *Result, env string) EnvResult {
	t.Helper()
	for _, e := range res.Envs {
		if e.Env == env {
			return e
		}
	}
	t.Fatalf("no env %s in %+v", env, res.Envs)
	return EnvResult{}
}

func rules(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Rule)
	}
	return out
}

func changed(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Change+" "+c.Kind+" "+c.Namespace+"/"+c.Name)
	}
	return out
}

// TestAChangeToPinnedProdFailsAtItsNextPromotion: a commit on main raises vllm-qwen's
// maxReplicaCount in prod's overlay past the GPU pool. Prod runs its pin, where nothing changed;
// at its next promotion the pool is exceeded, and that fails the change that brought it. A later
// change elsewhere inherits the violation without failing for it; a change to dev's overlay
// alone leaves prod's next promotion as it was.
func TestAChangeToPinnedProdFailsAtItsNextPromotion(t *testing.T) {
	dir, _, edit := repoCopy(t)
	pin := strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD~1")) // HEAD is the promotion commit
	plainCommit := func(msg string) { gittest.Run(t, dir, "add", "-A"); gittest.Run(t, dir, "commit", "-qm", msg) }
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)

	edit("overlays/prod/scaling.yaml", "maxReplicaCount: 8", "maxReplicaCount: 80")
	plainCommit("prod: qwen up to 80 replicas")
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	prod := envOf(t, res, "prod")
	assert.Equal(t, "prod", res.Envs[0].Env, "prod comes first")
	assert.Equal(t, pin, prod.Revision, "prod is judged at its pin")
	assert.Empty(t, prod.Violations, "prod at its pin runs what it ran")
	assert.Empty(t, prod.Changes, "prod at its pin renders what it rendered")
	require.NotNil(t, prod.Next, "a pinned env is previewed at its next promotion")
	assert.Equal(t, res.Head, prod.Next.Revision)
	assert.Equal(t, []string{"capacity-gpu-pool-limit"}, rules(prod.Next.Violations))
	assert.Contains(t, prod.Next.Violations[0].Message, "88")
	assert.Empty(t, prod.Next.Inherited)
	assert.Empty(t, cmp.Diff([]string{"changed ScaledObject llm-inference/vllm-qwen"}, changed(prod.Next.Introduced)))
	assert.Empty(t, cmp.Diff(prod.Next.Introduced, prod.Next.Changes), "the pin renders as HEAD~1: the promotion carries this change alone")
	assert.False(t, res.Passed, "the change that breaks prod's next promotion fails")
	staging := envOf(t, res, "staging")
	require.NotNil(t, staging.Next)
	assert.Empty(t, staging.Next.Introduced, "prod's overlay is not staging's")
	assert.Nil(t, envOf(t, res, "dev").Next, "dev follows main: no promotion to preview")

	// A dev-only change on top: prod's next promotion is what it was, its violation inherited.
	edit("overlays/dev/capacity.yaml", `requests.cpu: "4"`, `requests.cpu: "6"`)
	plainCommit("dev: more CPU for the API")
	res, err = Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	prod = envOf(t, res, "prod")
	require.NotNil(t, prod.Next)
	assert.Empty(t, prod.Next.Introduced, "a change to dev's overlay does not touch prod")
	assert.Empty(t, prod.Next.Violations)
	assert.Equal(t, []string{"capacity-gpu-pool-limit"}, rules(prod.Next.Inherited))
	assert.Empty(t, cmp.Diff([]string{"changed ScaledObject llm-inference/vllm-qwen"}, changed(prod.Next.Changes)),
		"the promotion still carries the earlier change")
	assert.Empty(t, cmp.Diff([]string{"changed ResourceQuota llm-api/llm-api-quota"}, changed(envOf(t, res, "dev").Changes)))
	assert.True(t, res.Passed, "an inherited violation fails the promotion, not this change: %+v", res.Envs)
}

// TestCheckReadsTheWorkTree: an uncommitted change is checked as CI will check it once
// committed, and a broken file there is an error naming its file and line, as render says.
func TestCheckReadsTheWorkTree(t *testing.T) {
	dir, _, edit := repoCopy(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	edit("overlays/prod/scaling.yaml", "maxReplicaCount: 8", "maxReplicaCount: 80")
	wt, err := repo.WorkTree()
	require.NoError(t, err)
	require.True(t, wt.Dirty())
	res, err := RunTree(repo, "HEAD", wt)
	require.NoError(t, err)
	assert.Equal(t, dir, res.WorkTree)
	assert.Empty(t, res.Head)
	prod := envOf(t, res, "prod")
	require.NotNil(t, prod.Next)
	assert.Empty(t, prod.Next.Revision, "the work tree has no commit")
	assert.Equal(t, []string{"capacity-gpu-pool-limit"}, rules(prod.Next.Violations))
	assert.False(t, res.Passed)

	p := filepath.Join(dir, "overlays/prod/scaling.yaml")
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, append(data, []byte("  broken: [\n")...), 0o644))
	wt, err = repo.WorkTree()
	require.NoError(t, err)
	_, err = RunTree(repo, "HEAD", wt)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "overlays/prod/scaling.yaml:")
	assert.Contains(t, err.Error(), "the work tree of "+dir)
}

// TestWhatWasBrokenBeforeTheChangeIsInherited: a violation forced into prod's pin, a violation
// a change makes better rather than worse, and one a branch forked before main fixed it are
// reported but fail none of those changes.
func TestWhatWasBrokenBeforeTheChangeIsInherited(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	plainCommit := func(msg string) { gittest.Run(t, dir, "add", "-A"); gittest.Run(t, dir, "commit", "-qm", msg) }
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)

	// Forced into prod (the change and its promotion), then a change to dev alone.
	edit("overlays/prod/scaling.yaml", "maxReplicaCount: 8", "maxReplicaCount: 80")
	commit("prod: qwen up to 80 replicas, promoted past the check")
	forked := strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD"))
	edit("overlays/dev/capacity.yaml", `requests.cpu: "4"`, `requests.cpu: "6"`)
	plainCommit("dev: more CPU for the API")
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	prod := envOf(t, res, "prod")
	assert.Empty(t, prod.Violations)
	assert.Equal(t, []string{"capacity-gpu-pool-limit"}, rules(prod.Inherited), "prod runs it at its pin already")
	assert.Equal(t, []string{"capacity-gpu-pool-limit"}, rules(prod.Next.Inherited))
	assert.True(t, res.Passed, "%+v", prod)
	assert.Empty(t, res.Fork, "HEAD~1 is where the head forked")

	// A change to the same object is judged anew, better (vllm-llama 4 → 3: 87 GPUs rather than
	// 88) or worse: the violation it leaves is its own.
	edit("overlays/prod/scaling.yaml", "maxReplicaCount: 4", "maxReplicaCount: 3")
	plainCommit("prod: llama up to 3 replicas")
	res, err = Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	prod = envOf(t, res, "prod")
	require.Len(t, prod.Next.Violations, 1)
	assert.Contains(t, prod.Next.Violations[0].Message, "need 87 GPUs")
	assert.Empty(t, prod.Next.Inherited)
	assert.False(t, res.Passed)

	// A branch forked before main fixed it is judged as what would land: the violation was at the
	// fork point but is not at base, so it is the branch's own.
	gittest.Run(t, dir, "branch", "topic", forked)
	edit("overlays/prod/scaling.yaml", "maxReplicaCount: 80", "maxReplicaCount: 8")
	edit("overlays/prod/scaling.yaml", "maxReplicaCount: 3", "maxReplicaCount: 4")
	commit("prod: qwen back to 8 replicas, llama to 4")
	main := strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD"))
	gittest.Run(t, dir, "checkout", "-q", "topic")
	edit("overlays/dev/capacity.yaml", `requests.cpu: "4"`, `requests.cpu: "5"`)
	plainCommit("dev: a little more CPU for the API")
	res, err = Run(repo, main, "HEAD")
	require.NoError(t, err)
	assert.Equal(t, forked, res.Fork)
	prod = envOf(t, res, "prod")
	assert.Equal(t, []string{"capacity-gpu-pool-limit"}, rules(prod.Violations), "main no longer has it: merging the branch would bring it back")
	assert.False(t, res.Passed)

	// Against a base that still has it (the fork point itself), the branch inherits it.
	res, err = Run(repo, forked, "HEAD")
	require.NoError(t, err)
	prod = envOf(t, res, "prod")
	assert.Empty(t, prod.Violations)
	assert.Equal(t, []string{"capacity-gpu-pool-limit"}, rules(prod.Inherited))
	assert.True(t, res.Passed, "%+v", res.Envs)
}

// TestAHandWrittenForcedTrailerExcusesNothing: a commit that carries a forced promotion's
// trailers but changes more than the env's release file, or names rules no promotion runs, is
// no forced promotion.
func TestAHandWrittenForcedTrailerExcusesNothing(t *testing.T) {
	dir, _, edit := repoCopy(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	edit("overlays/prod/scaling.yaml", "maxReplicaCount: 8", "maxReplicaCount: 80")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "prod: qwen up to 80 replicas")
	change := strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD"))
	pinAll(t, dir, change)
	edit("clusters/prod/schedule.yaml", `cron: "0 9 * * 1-5"`, `cron: "0 99 * * 1-5"`)
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "promote dev → prod\n\nPromote-To: prod\nPromote-Revision: "+change+
		"\nPromote-Forced: trust me\nPromote-Forced-Past: capacity-gpu-pool-limit NodePool gpu; schedule clusters/prod/schedule.yaml")
	res, err := Run(repo, "HEAD~2", "HEAD")
	require.NoError(t, err)
	prod := envOf(t, res, "prod")
	assert.Empty(t, prod.Forced)
	assert.Contains(t, rules(prod.Violations), "capacity-gpu-pool-limit")
	assert.Contains(t, rules(prod.Violations), "schedule")
	assert.False(t, res.Passed)
}
