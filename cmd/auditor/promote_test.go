package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// pinnedLedgerRepo is newLedgerRepo with the project's apps/ and staging and prod pinned to the
// first commit.
func pinnedLedgerRepo(t *testing.T) (*ledgerRepo, string) {
	l := newLedgerRepo(t)
	first := l.git(ledgerT0, "rev-parse", "HEAD")
	for _, dir := range []string{"apps/common", "apps/dev", "apps/staging", "apps/prod"} {
		entries, err := os.ReadDir(filepath.Join("..", "..", dir))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(l.work, dir), 0o755))
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join("..", "..", dir, e.Name()))
			require.NoError(t, err)
			if e.Name() == "release.yaml" && dir != "apps/dev" {
				data, err = release.Set(filepath.Base(dir), data, first, "")
				require.NoError(t, err)
			}
			require.NoError(t, os.WriteFile(filepath.Join(l.work, dir, e.Name()), data, 0o644))
		}
	}
	l.commit("apps: staging and prod pinned")
	return l, first
}

// TestPromoteCommand: a canary change on main reaches prod by two promotions, each showing the
// fields it changes; the ledger records the promotion; reverting the promotion is the rollback.
func TestPromoteCommand(t *testing.T) {
	l, first := pinnedLedgerRepo(t)
	url := "file://" + l.bare
	l.setCanary("50", "50")
	canary := l.commit("prod: qwen canary 50%")

	// dev → staging: staging has no canary route, so the move changes nothing it renders.
	out, err := runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "staging", "--direct")
	require.NoError(t, err, out)
	assert.Contains(t, out, "promote dev → staging: "+gitrepo.Short(first)+" → "+gitrepo.Short(canary)+", 0 objects change")
	assert.Contains(t, out, "committed ")

	// staging → prod: --dry-run shows the weights and commits nothing.
	out, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "staging", "--to", "prod", "--dry-run")
	require.NoError(t, err)
	assert.Contains(t, out, "promote staging → prod: "+gitrepo.Short(first)+" → "+gitrepo.Short(canary))
	assert.Contains(t, out, "~ HTTPRoute llm-inference/qwen")
	assert.Contains(t, out, ".weight: 90 → 50")
	assert.NotContains(t, out, "committed")
	bare, err := gitrepo.Open(url)
	require.NoError(t, err)
	rev, err := release.RevisionAt(bare, "prod", "main")
	require.NoError(t, err)
	assert.Equal(t, first, rev, "--dry-run committed nothing")

	out, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "staging", "--to", "prod", "--direct")
	require.NoError(t, err, out)
	assert.Contains(t, out, "clusters/prod/model-ledger.jsonl: ")

	// The ledger: the share change, at the promotion commit, with the release it runs.
	var recs []ledger.Record
	out, err = runCmd(t, newLedgerCommand(), "list", "--repo", url, "--env", "prod", "-o", "json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &recs))
	var promotion string
	for _, r := range recs {
		if r.Deployment == "vllm-qwen-canary" && r.Kind == ledger.KindChanged {
			assert.Equal(t, 50.0, r.SharePercent)
			assert.Equal(t, canary, r.Release)
			assert.True(t, strings.HasPrefix(r.Subject, "promote staging → prod"), r.Subject)
			promotion = r.Revision
		}
	}
	require.NotEmpty(t, promotion, "no ledger record of the promotion:\n%s", out)

	// Roll prod back by reverting the promotion.
	out, err = runCmd(t, newRollbackCommand(), promotion, "--repo", url, "--env", "prod")
	require.NoError(t, err, out)
	require.NoError(t, bare.Fetch(t.Context()))
	rev, err = release.RevisionAt(bare, "prod", "main")
	require.NoError(t, err)
	assert.Equal(t, first, rev, "the revert moved prod back")
	assert.Contains(t, out, "rollback")
}

// TestPromoteIsGatedAndReviewable: a promotion that breaks a rule of auditor check in the target
// env is refused and writes nothing; one that passes is pushed to a branch of its own for review,
// main untouched; one forced past its violations needs a reason, which the commit and the
// ledger keep.
func TestPromoteIsGatedAndReviewable(t *testing.T) {
	l, first := pinnedLedgerRepo(t)
	url := "file://" + l.bare
	heads := func() string { return l.git(ledgerT0, "ls-remote", "--heads", l.bare) }
	p := filepath.Join(l.work, "overlays/prod/scaling.yaml")
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	s := strings.Replace(string(data), "minReplicaCount: 2\n  maxReplicaCount: 8", "minReplicaCount: 80\n  maxReplicaCount: 80", 1)
	require.NotEqual(t, string(data), s, "vllm-qwen's ScaledObject in prod's overlay")
	require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	bad := l.commit("prod: qwen at 80 replicas")
	before := heads()

	// Refused: exit 1, the violation named, nothing pushed, to main or to a branch for review.
	for _, direct := range []bool{false, true} {
		args := []string{"--repo", url, "--from", "dev", "--to", "prod", "--skip-stage"}
		if direct {
			args = append(args, "--direct")
		}
		out, err := runCmd(t, newPromoteCommand(), args...)
		require.Error(t, err, out)
		assert.Equal(t, codeFound, exitStatus(io.Discard, err), err)
		assert.Contains(t, out, "promotion refused: prod at "+gitrepo.Short(bad)+" breaks 1 rule")
		assert.Contains(t, out, "~ ScaledObject llm-inference/vllm-qwen")
		assert.Contains(t, out, "VIOLATION capacity-gpu-pool-limit")
		assert.Equal(t, before, heads(), "a refused promotion writes nothing")
	}

	// A reason is required to force it.
	_, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "prod", "--skip-stage", "--force")
	assert.Equal(t, codeError, exitStatus(io.Discard, err), err)

	// Staging has no such change: its promotion passes and goes to a branch for review.
	out, err := runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "staging")
	require.NoError(t, err, out)
	branch := "promote/staging-" + gitrepo.Short(bad)
	assert.Contains(t, out, "check staging at "+gitrepo.Short(bad)+": 0 violations")
	assert.Contains(t, out, "open a pull request from "+branch+" into main")
	assert.Contains(t, heads(), "refs/heads/"+branch)
	bare, err := gitrepo.Open(url)
	require.NoError(t, err)
	rev, err := release.RevisionAt(bare, "staging", "main")
	require.NoError(t, err)
	assert.Equal(t, first, rev, "main is untouched until the pull request is merged")
	rev, err = release.RevisionAt(bare, "staging", branch)
	require.NoError(t, err)
	assert.Equal(t, bad, rev, "the review branch moves staging's pin")
	assert.Equal(t, bad, l.git(ledgerT0, "--git-dir", l.bare, "rev-parse", branch+"^"), "made on main's head")
	review := l.git(ledgerT0, "--git-dir", l.bare, "rev-parse", branch)

	// A review branch is made, never replaced, and is never the branch itself.
	_, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "staging")
	assert.Equal(t, codeError, exitStatus(io.Discard, err), err)
	assert.ErrorIs(t, err, gitrepo.ErrBranchExists)
	assert.Equal(t, review, l.git(ledgerT0, "--git-dir", l.bare, "rev-parse", branch), "the open review is untouched")
	_, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "staging", "--review-branch", "main")
	assert.Equal(t, codeError, exitStatus(io.Discard, err), err)
	rev, err = release.RevisionAt(bare, "staging", "main")
	require.NoError(t, err)
	assert.Equal(t, first, rev, "main is untouched")

	// Forced, with a reason, for review: the reason is in the commit, and, once the pull request
	// is merged with a merge commit as forges do, in the ledger.
	reason := "INC-4711: the GPU pool limit is raised today"
	out, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "prod", "--skip-stage", "--force", "--reason", reason)
	require.NoError(t, err, out)
	assert.Contains(t, out, "forced past 1 violation: "+reason)
	forcedBranch := "promote/prod-" + gitrepo.Short(bad)
	msg := l.git(ledgerT0, "--git-dir", l.bare, "log", "-1", "--format=%B", forcedBranch)
	assert.Contains(t, msg, release.TrailerForced+": "+reason)
	assert.Contains(t, msg, release.TrailerForcedPast+": capacity-gpu-pool-limit NodePool gpu")
	// Its pull request passes the check, on the branch and on the merge a forge checks out: the
	// violation is reported as forced, not failing.
	out, err = runCmd(t, newCheckCommand(), "--repo", url, "--base", "main", "--head", forcedBranch)
	require.NoError(t, err, out)
	assert.Contains(t, out, "FORCED capacity-gpu-pool-limit")
	assert.Contains(t, out, reason)
	l.git(ledgerT0, "fetch", "-q", "origin")
	l.git(ledgerT0, "merge", "-q", "--no-ff", "-m", "Merge pull request #8 from "+forcedBranch, "origin/"+forcedBranch)
	out, err = runCmd(t, newCheckCommand(), "--repo", l.work, "--base", "origin/main", "--head", "HEAD")
	require.NoError(t, err, out)
	assert.Contains(t, out, "FORCED capacity-gpu-pool-limit")
	l.git(ledgerT0, "push", "-q", "origin", "HEAD:refs/heads/main")
	out, err = runCmd(t, newLedgerCommand(), "sync", "--repo", url, "--env", "prod")
	require.NoError(t, err, out)
	var recs []ledger.Record
	out, err = runCmd(t, newLedgerCommand(), "list", "--repo", url, "--env", "prod", "-o", "json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &recs))
	var forced []string
	for _, r := range recs {
		if r.Release == bad {
			forced = append(forced, r.Deployment+": "+r.Forced)
		}
	}
	assert.Equal(t, []string{"vllm-qwen: " + reason}, forced, "%s", out)
}
