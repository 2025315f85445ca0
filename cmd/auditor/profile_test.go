package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/platform/schedule"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// copyPlatform copies the repository's manifests and prod's schedule into a new directory, a Git
// work tree of its own.
func copyPlatform(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, dir, "base", "components", "overlays", "clusters")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "platform"}} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

// The command reads four synthetic weeks of qwen from a real Prometheus, finds prod's weekday
// morning in the schedule and the paydays missing from it, and writes the profile and the new
// peak; `git apply` of its printed diff makes the same files.
func TestProfileCommandWritesTheProfileAndTheMissingPeak(t *testing.T) {
	tr := testfixture.QwenTraffic()
	var series bytes.Buffer
	require.NoError(t, tr.WriteOpenMetrics(&series))
	url := testcluster.StartPrometheus(t, series.Bytes())
	repo := copyPlatform(t)
	args := []string{"profile", "--env", "prod", "--model", "qwen", "--prometheus", url, "--repo", repo,
		"--at", tr.End.Format("2006-01-02T15:04:05-07:00"), "--rate-window", "15m"}

	dry, err := runCmd(t, newRootCommand(), args...)
	require.NoError(t, err)
	for _, want := range []string{
		"Profile of qwen (Service vllm-qwen), 2026-11-02 00:00 to 2026-11-30 00:00, Europe/Moscow (672 hours)",
		"one replica at saturation: 2 req/s, 520 generated tokens/s",
		"Queue threshold of ScaledObject llm-inference/vllm-qwen: 10 -> 4",
		"  Mon  00-09: 1, 09-12: 4, 12-19: 2, 19-24: 1",
		"weekday-0900: cron \"0 9 * * 1-5\" at 09:00 for 3h0m0s, warm at least 4",
		"covered by schedule peak weekday-morning",
		"days-10-25-0900: days 10, 25 of the month (seen 2026-11-10, 2026-11-25) at 09:00 for 9h0m0s, warm at least 7",
		"MISSING from the schedule: added below",
		"overlaps weekday-morning on the same field: the schedule composes them",
		"+++ b/clusters/prod/schedule.yaml",
		"+  - name: days-10-25-0900",
		"lead time: 14m36s",
		"1 GPU a replica on l40s at 1.861 USD per GPU-hour",
		"--max-num-seqs 13 × 2,384 tokens (1,875 prompt + 494 response in blocks of 16)",
		"the profile allows 183 sequences",
		"+++ b/clusters/prod/profiles/qwen.yaml",
		"+++ b/overlays/prod/profile-vllm-qwen.yaml",
		"+  path: /spec/triggers/0/metadata/threshold",
		"+  - path: profile-vllm-qwen.yaml",
	} {
		assert.Contains(t, dry, want)
	}
	assert.NoFileExists(t, filepath.Join(repo, profile.Path("prod", "qwen")), "without --write nothing is written")

	// The printed diff applies with git, and --write writes the same files.
	diff := dry[strings.Index(dry, "diff --git"):]
	cmd := exec.Command("git", "-C", repo, "apply", "--check", "-")
	cmd.Stdin = strings.NewReader(diff)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git apply --check: %s\n%s", out, diff)

	_, err = runCmd(t, newRootCommand(), append(args, "--write")...)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(repo, profile.Path("prod", "qwen")))
	require.NoError(t, err)
	p, err := profile.Parse(profile.Path("prod", "qwen"), data)
	require.NoError(t, err)
	assert.InDelta(t, tr.Response.Quantile(0.95), p.Tokens.Response.P95, 0.01)
	after, err := os.ReadFile(filepath.Join(repo, schedule.Path("prod")))
	require.NoError(t, err)
	s, err := schedule.Parse(schedule.Path("prod"), after)
	require.NoError(t, err)
	paydays := s.Peak("days-10-25-0900")
	require.NotNil(t, paydays)
	assert.Equal(t, need(tr, 10), paydays.Warm)
	assert.Equal(t, "vllm-qwen", paydays.Target.Name)
	assert.Equal(t, "overlays/prod/scaling.yaml", paydays.Target.Path)

	// Rendered, prod's ScaledObject now waits for the proposed queue, on the same trigger.
	src, err := render.FromDir(repo)
	require.NoError(t, err)
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	require.NoError(t, err)
	var threshold, trigger string
	for _, o := range res.Objects {
		if o.GetKind() == "ScaledObject" && o.GetName() == "vllm-qwen" {
			triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
			first := triggers[0].(map[string]any)
			trigger, threshold = first["name"].(string), first["metadata"].(map[string]any)["threshold"].(string)
		}
	}
	assert.Equal(t, "queue-depth", trigger)
	assert.Equal(t, "4", threshold)

	// Run again on what it wrote: the paydays are covered, and the threshold agrees.
	again, err := runCmd(t, newRootCommand(), args...)
	require.NoError(t, err)
	assert.Contains(t, again, "covered by schedule peak days-10-25-0900")
	assert.Contains(t, again, "Queue threshold of ScaledObject llm-inference/vllm-qwen: 4 -> 4")
	assert.NotContains(t, again, "+++ b/clusters/prod/schedule.yaml")
	assert.NotContains(t, again, "profile-vllm-qwen.yaml")

	// Without weekday-morning in the schedule, one week without a payday finds the weekday
	// morning: it is written, and then covered.
	morning := regexp.MustCompile(`(?s)\n  # Office hours start.*?    warm: 4\n`)
	require.Regexp(t, morning, string(after))
	require.NoError(t, os.WriteFile(filepath.Join(repo, schedule.Path("prod")), []byte(morning.ReplaceAllString(string(after), "\n")), 0o644))
	week := []string{"profile", "--env", "prod", "--model", "qwen", "--prometheus", url, "--repo", repo,
		"--at", "2026-11-23T00:00:00+03:00", "--window", "168h", "--rate-window", "15m"}
	weekOut, err := runCmd(t, newRootCommand(), append(week, "--write")...)
	require.NoError(t, err)
	assert.Contains(t, weekOut, "weekday-0900: cron \"0 9 * * 1-5\" at 09:00 for 3h0m0s, warm at least 4")
	assert.NotContains(t, weekOut, "days-")
	written, err := os.ReadFile(filepath.Join(repo, schedule.Path("prod")))
	require.NoError(t, err)
	s, err = schedule.Parse(schedule.Path("prod"), written)
	require.NoError(t, err)
	added := s.Peak("weekday-0900")
	require.NotNil(t, added)
	assert.Equal(t, need(tr, 6), added.Warm)
	assert.Equal(t, "vllm-qwen", added.Target.Name)
	assert.Equal(t, "overlays/prod/scaling.yaml", added.Target.Path)
	weekOut, err = runCmd(t, newRootCommand(), week...)
	require.NoError(t, err)
	assert.Contains(t, weekOut, "covered by schedule peak weekday-0900")
}

// need is the replicas rate needs at 80 % of a replica's saturated throughput.
func need(tr testfixture.Traffic, rate float64) int64 {
	return int64(math.Ceil(rate / (tr.ServedPerPod * 0.8)))
}
