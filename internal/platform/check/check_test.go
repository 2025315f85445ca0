package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// repoCopy puts the project's manifests and policies in a fresh Git repository and commits them.
func repoCopy(t *testing.T) (string, func(msg string), func(rel, old, new string)) {
	t.Helper()
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, gittest.ReadTree(t, "../../..", ".auditor.yaml", "base", "components", "overlays", "apps", "policies", "clusters", "docs"))
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	// Every commit is promoted to staging and prod right after (their pins move to it in a
	// commit of its own), so the rules see each change in every env: HEAD~1 is the change,
	// HEAD the promotion.
	commit := func(msg string) {
		git("add", "-A")
		git("commit", "-qm", msg)
		pinAll(t, dir, strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD")))
		git("add", "-A")
		git("commit", "-qm", "promote "+msg)
	}
	edit := func(rel, old, new string) {
		p := filepath.Join(dir, rel)
		data, _ := os.ReadFile(p)
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s lacks %q", rel, old)
		}
		_ = os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644)
	}
	commit("platform")
	return dir, commit, edit
}

// pinAll pins staging and prod of the copy in dir to rev (their release files' data.revision).
func pinAll(t *testing.T, dir, rev string) { t.Helper(); setRelease(t, dir, rev, "staging", "prod") }

// setRelease sets the release of envs in the copy in dir to rev (a commit or a branch).
func setRelease(t *testing.T, dir, rev string, envs ...string) {
	t.Helper()
	for _, env := range envs {
		p := filepath.Join(dir, release.File(env))
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out, err := release.Set(env, data, rev, "")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, out, 0o644))
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "git %v", args)
	return string(out)
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name  string
		file  string
		old   string
		new   string
		rules []string // expected violated rules in prod; none = pass
	}{
		{"image bump passes", "overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.4.3", nil},
		{"latest image fails", "overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: latest", []string{"llm-images-pinned"}},
		{"more sequences than the KV cache holds", "base/vllm/llama.yaml", "--max-num-seqs=11", "--max-num-seqs=64", []string{"capacity-kv-cache"}},
		{"more sequences than the KV cache holds after the overhead", "base/vllm/llama.yaml", "--max-num-seqs=11", "--max-num-seqs=12", []string{"capacity-kv-cache"}},
		{"more replicas than the GPU pool", "overlays/prod/scaling.yaml", "maxReplicaCount: 8", "maxReplicaCount: 12", []string{"capacity-gpu-pool-limit"}},
		{"probe budget below the cold start", "base/vllm/qwen.yaml", "failureThreshold: 36", "failureThreshold: 10", []string{"capacity-startup-probe"}},
		{"probe budget without its margin over the cold start", "base/vllm/qwen.yaml", "failureThreshold: 36", "failureThreshold: 33", []string{"capacity-startup-probe"}},
		// issue #15: the rag-api HTTPRoute (wave 0) waiting on a Gateway of wave 1 that is never applied
		{"vLLM grace period shorter than the drain", "base/vllm/qwen.yaml", "terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 60", []string{"vllm-drain"}},
		{"vLLM without the weights marker init container", "base/vllm/qwen.yaml", "value: /models/qwen/a09a35458c702b33eeacc393d103063234e8bc28.ready", "value: /models/qwen/latest.ready", []string{"vllm-weights"}},
		{"vLLM in float16 on a bf16 card", "overlays/prod/canary/canary.yaml", "- --dtype=auto", "- --dtype=float16", []string{"vllm-dtype"}},
		{"Gateway after its HTTPRoute", "base/gateway/kustomization.yaml", `sync-wave: "-1"`, `sync-wave: "2"`, []string{"sync-wave-order"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, commit, edit := repoCopy(t)
			edit(tc.file, tc.old, tc.new)
			commit(tc.name)
			repo, err := gitrepo.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(repo, "HEAD~1", "HEAD")
			if err != nil {
				t.Fatal(err)
			}
			prod := res.Envs[0]
			if prod.Env != "prod" {
				t.Fatalf("first env %s, want prod", prod.Env)
			}
			if len(prod.Changes) == 0 {
				t.Errorf("no rendered change shown for %s", tc.file)
			}
			var got []string
			for _, v := range prod.Violations {
				got = append(got, v.Rule)
			}
			for _, want := range tc.rules {
				if !strings.Contains(strings.Join(got, " "), want) {
					t.Errorf("violations %v lack %s", got, want)
				}
			}
			if len(tc.rules) == 0 && (len(got) > 0 || !res.Passed) {
				t.Errorf("want pass, got violations %v", prod.Violations)
			}
			if len(tc.rules) > 0 && res.Passed {
				t.Errorf("want fail")
			}
		})
	}
}

func TestCheckValidatesScheduleAndLedger(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("clusters/prod/schedule.yaml", `cron: "0 9 * * 1-5"`, `cron: "0 9 * * MON-FRY"`)
	if err := os.WriteFile(filepath.Join(dir, "clusters/prod/model-ledger.jsonl"), []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	commit("break the schedule and the ledger")
	repo, _ := gitrepo.Open(dir)
	res, err := Run(repo, "HEAD~2", "HEAD") // before the change and its promotion
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range res.Envs[0].Violations {
		got = append(got, v.Rule+": "+v.Message)
	}
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "schedule: clusters/prod/schedule.yaml:") || !strings.Contains(all, "ledger: clusters/prod/model-ledger.jsonl:1") || res.Passed {
		t.Errorf("want schedule and ledger violations with file:line, got:\n%s", all)
	}
}

func TestCheckBadInput(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	repo, _ := gitrepo.Open(dir)
	if _, err := Run(repo, "no-such-rev", "HEAD"); err == nil || !strings.Contains(err.Error(), "no-such-rev") {
		t.Errorf("unknown revision: %v", err)
	}
	edit("policies/images-pinned.yaml", "- expression: variables.unpinned.size() == 0", "- expression: variables.unpinned.size( == 0")
	commit("break a policy")
	repo, _ = gitrepo.Open(dir)
	_, err := Run(repo, "HEAD~1", "HEAD")
	if err == nil || !strings.Contains(err.Error(), "llm-images-pinned") {
		t.Errorf("unparsable CEL: error %v should name the policy", err)
	}
}

// TestCheckWaveOrderNamesBothObjects puts the Gateway back after the rag-api route (issue #15) and
// wants one violation naming the route and the Gateway.
func TestCheckWaveOrderNamesBothObjects(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("base/gateway/kustomization.yaml", `sync-wave: "-1"`, `sync-wave: "2"`) // the vLLM routes' wave: only rag-api's (1) is earlier
	commit("Gateway in wave 2")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		waves := violations(env, "sync-wave-order")
		require.Len(t, waves, 1, "%s: %+v", env.Env, env.Violations)
		assert.Equal(t, "HTTPRoute llm-api/rag-api", waves[0].Object)
		assert.Contains(t, waves[0].Message, "needs Gateway llm-inference/llm-gateway (sync wave 2, its parentRef)")
	}
}

// TestCheckKEDAReachOldTrigger puts back the KV-cache trigger of issue #15 (avg, AverageValue):
// prod's vllm-qwen (max 8) fails, naming the trigger and the cap.
func TestCheckKEDAReachOldTrigger(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("base/vllm/qwen.yaml", `query: sum(vllm:kv_cache_usage_perc{model_name="qwen",service="vllm-qwen"})`,
		`query: avg(vllm:kv_cache_usage_perc{model_name="qwen"})`)
	commit("avg KV trigger")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	got := violations(res.Envs[0], "capacity-keda-reach")
	require.Len(t, got, 1, "%+v", res.Envs[0].Violations)
	assert.Equal(t, "ScaledObject llm-inference/vllm-qwen", got[0].Object)
	assert.Contains(t, got[0].Message, "trigger kv-cache")
	assert.Contains(t, got[0].Message, "can never reach maxReplicaCount 8")
	assert.Contains(t, got[0].Message, "ceil(1 / 0.8) = 2")
}

// TestCheckRendersAnUnchangedEnvOnce: a change outside every env's render (a doc) leaves each
// env's base and head reading the same files, so each env is rendered once, and the result is
// the one a check without the cache gives.
func TestCheckRendersAnUnchangedEnvOnce(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("docs/install.md", "#", "# ")
	commit("a doc change")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	saved := renders
	t.Cleanup(func() { renders = saved })
	renders = render.NewCache("", 8) // this test's own: no render of another test answers
	res, err := Run(repo, "HEAD~2", "HEAD")
	require.NoError(t, err)
	st := renders.Stats()
	assert.Equal(t, len(res.Envs), st.Rendered, "one kustomize run per env")
	pinned := 0
	for _, env := range res.Envs {
		if env.Next != nil {
			pinned++
		}
	}
	assert.Equal(t, 2, pinned, "staging and prod run their pins")
	// Each env's base side, and each pinned env's next promotion at head and at base.
	assert.Equal(t, len(res.Envs)+2*pinned, st.ByContent+st.ByRevision, "the other renders of each env from the cache")
	for _, env := range res.Envs {
		assert.Empty(t, env.Changes, "env %s: a doc change changes no object", env.Env)
	}
	renders = nil // every render runs kustomize
	uncached, err := Run(repo, "HEAD~2", "HEAD")
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(uncached, res), "with the cache, the same result")
}
