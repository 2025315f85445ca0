package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-gitops/platform/internal/platform/schedule"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runSchedule(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCmd(t, newScheduleCommand(), args...)
}

func scheduleGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// scheduleRepo makes a work tree with the project's overlays/prod/scaling.yaml (as the only
// target file) and schedule, and a bare clone of it.
func scheduleRepo(t *testing.T, schedule string) (work, bare string) {
	t.Helper()
	dir := t.TempDir()
	work = filepath.Join(dir, "work")
	scaling, err := os.ReadFile("../../overlays/prod/scaling.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"overlays/prod/scaling.yaml": scaling, "clusters/prod/schedule.yaml": []byte(schedule),
		"overlays/prod/kustomization.yaml": []byte("resources:\n- scaling.yaml\n")} // prod is an env: its overlay
	for p, c := range files {
		full := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, c, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scheduleGit(t, dir, "init", "-q", "-b", "main", work)
	scheduleGit(t, work, "add", "-A")
	scheduleGit(t, work, "commit", "-q", "-m", "initial")
	bare = filepath.Join(dir, "bare.git")
	scheduleGit(t, dir, "clone", "-q", "--bare", work, bare)
	return work, bare
}

func prodScheduleText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../clusters/prod/schedule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSchedulePlan(t *testing.T) {
	work, _ := scheduleRepo(t, prodScheduleText(t))
	out, err := runSchedule(t, "plan", "--env", "prod", "--repo", work, "--count", "3", "--now", "2027-04-08T10:00:00+03:00")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"2027-04-09T08:45:24+03:00  payday", "2027-04-09T08:45:24+03:00  weekday-morning",
		"lead      876s = argo sync 180s + cold start 336s + margin 360s", "image pull", "80s (10 GB at 125 MB/s (1 Gbit/s))",
		"change    overlays/prod/scaling.yaml ScaledObject/vllm-qwen spec.minReplicaCount: 2 → 4",
		"change    overlays/prod/scaling.yaml HorizontalPodAutoscaler/rag-api spec.minReplicas: 3 → 6"} {
		if !strings.Contains(out, w) {
			t.Errorf("plan output lacks %q:\n%s", w, out)
		}
	}
	out, err = runSchedule(t, "plan", "--env", "prod", "--repo", work, "--count", "2", "--at", "2027-04-08T10:00:00+03:00", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got []schedule.PlannedFiring
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Change.From == nil || got[0].Lead.TotalSeconds != 876 {
		t.Fatalf("json %s", out)
	}
}

func TestScheduleMalformedExit2(t *testing.T) {
	bad := strings.Replace(prodScheduleText(t), `cron: "0 9 * * 1-5"`, `cron: "0 9 * * 1-8"`, 1)
	work, _ := scheduleRepo(t, bad)
	_, err := runSchedule(t, "plan", "--env", "prod", "--repo", work)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "clusters/prod/schedule.yaml:23: bad cron") {
		t.Fatalf("error %v (exit %d)", err, exitCode(err))
	}
	_, err = runSchedule(t, "plan", "--env", "staging", "--repo", work)
	if exitCode(err) != 2 {
		t.Fatalf("missing schedule: %v", err)
	}
}

func TestScheduleFire(t *testing.T) {
	_, bare := scheduleRepo(t, prodScheduleText(t))
	args := []string{"fire", "--env", "prod", "--peak", "weekday-morning", "--repo", bare, "--at", "2099-04-06T08:45:24+03:00", "--author", "Ops <ops@example.com>"}
	head := scheduleGit(t, bare, "rev-parse", "main")
	out, err := runSchedule(t, append(args, "--dry-run")...)
	require.NoError(t, err)
	assert.Contains(t, out, "change  overlays/prod/scaling.yaml ScaledObject/vllm-qwen spec.minReplicaCount: 2 → 4")
	assert.Contains(t, out, "not pushed (dry run)")
	assert.Equal(t, head, scheduleGit(t, bare, "rev-parse", "main"), "fire --dry-run pushed")
	out, err = runSchedule(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "change  overlays/prod/scaling.yaml ScaledObject/vllm-qwen spec.minReplicaCount: 2 → 4") {
		t.Fatalf("output:\n%s", out)
	}
	msg := scheduleGit(t, bare, "log", "-1", "--format=%an%n%B", "main")
	for _, w := range []string{"Ops", "Schedule-Id: weekday-morning", "Fire-Time: 2099-04-06T05:45:24Z", "Schedule-Phase: scale-up"} {
		if !strings.Contains(msg, w) {
			t.Errorf("commit lacks %q:\n%s", w, msg)
		}
	}
	// Again: exactly once.
	out, err = runSchedule(t, args...)
	if err != nil || !strings.Contains(out, "no commit: already fired") {
		t.Fatalf("second fire: %v\n%s", err, out)
	}
	// And down.
	out, err = runSchedule(t, append(args, "--scale-down")...)
	if err != nil || !strings.Contains(out, "scale-down weekday-morning") {
		t.Fatalf("scale-down: %v\n%s", err, out)
	}
	if s := scheduleGit(t, bare, "show", "main:overlays/prod/scaling.yaml"); !strings.Contains(s, "minReplicaCount: 2\n  maxReplicaCount: 8") {
		t.Fatalf("after scale-down:\n%s", s)
	}
	if _, err := runSchedule(t, "fire", "--env", "prod", "--peak", "nope", "--repo", bare); exitCode(err) != 2 {
		t.Fatalf("unknown peak: %v", err)
	}
}

// Where a peak's windows overlap, --at picks the latest occurrence that has fired by then: at
// an occurrence's exact fire time, that one, not the earlier one still in progress.
func TestScheduleFireAtOverlappingWindows(t *testing.T) {
	text := strings.Replace(prodScheduleText(t), `cron: "0 9 * * 1-5"`, `cron: "0 9,11 * * 1-5"`, 1)
	_, bare := scheduleRepo(t, text)
	for _, tc := range []struct{ at, fire string }{
		{"2099-04-06T10:45:24+03:00", "2099-04-06T10:45:24+03:00"}, // the 11:00 one's fire time
		{"2099-04-06T10:00:00+03:00", "2099-04-06T08:45:24+03:00"}, // only the 09:00 one has fired
		{"2099-04-06T11:30:00+03:00", "2099-04-06T10:45:24+03:00"}, // both in progress: the later
	} {
		out, err := runSchedule(t, "fire", "--env", "prod", "--peak", "weekday-morning", "--repo", bare,
			"--at", tc.at, "--dry-run")
		require.NoError(t, err, out)
		assert.Contains(t, out, "fire time "+tc.fire, "--at %s", tc.at)
	}
}
