package schedule

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

var bot = gitrepo.Person{Name: "Schedule Bot", Email: "schedule@example.com"}

// future is a fire time whose deadline is far ahead (so no DeadlineError).
func futureFiring(t *testing.T, s *Schedule, peak string) time.Time {
	t.Helper()
	p := s.Peak(peak)
	start, ok := p.NextStart(time.Now().Add(24 * time.Hour))
	if !ok {
		t.Fatal("no start")
	}
	return start.Add(-s.Lead.Total)
}

// scheduleCommits lists the commits of main with a Schedule-Id trailer.
func scheduleCommits(t *testing.T, bare string) []gitrepo.Commit {
	t.Helper()
	repo, err := gitrepo.Open("file://" + bare)
	if err != nil {
		t.Fatal(err)
	}
	all, err := repo.Log(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	var out []gitrepo.Commit
	for _, c := range all {
		if _, ok := c.Trailer(TrailerID); ok {
			out = append(out, c)
		}
	}
	return out
}

// TestFireConcurrentPushesExactlyOnce races a firing against five people pushing with the git
// CLI, over file:// and over smart HTTP with authentication (git http-backend behind net/http/cgi).
func TestFireConcurrentPushesExactlyOnce(t *testing.T) {
	for _, transport := range []string{"file", "smart-http"} {
		t.Run(transport, func(t *testing.T) { testFireRace(t, transport) })
	}
}

func testFireRace(t *testing.T, transport string) {
	files := projectFiles(t)
	commentedScaling(t, files)
	bare := newBare(t, files)
	s := loadProd(t, bare)
	fire := futureFiring(t, s, "weekday-morning")
	remote, cloneURL := fileRemote(t, bare), bare
	if transport == "smart-http" {
		gitOut(t, bare, "config", "http.receivepack", "true")
		srv := gittest.HTTPServer(t, filepath.Dir(bare), "bot", "s3cret-token")
		pw := filepath.Join(t.TempDir(), "token")
		writeFiles(t, filepath.Dir(pw), map[string]string{"token": "s3cret-token\n"})
		var err error
		remote, err = gitrepo.NewRemote(gitrepo.RemoteConfig{URL: srv.URL + "/" + filepath.Base(bare), Username: "bot", PasswordFile: pw})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(srv.URL + "/" + filepath.Base(bare))
		u.User = url.UserPassword("bot", "s3cret-token")
		cloneURL = u.String()
	}

	// Five people push unrelated commits with the git CLI while the schedule fires. Everyone
	// clones before anyone pushes: a local clone copies the object directory, and a push landing
	// meanwhile (its quarantine directory vanishing under the copy) fails the clone.
	works := make([]string, 5)
	for g := range works {
		works[g] = filepath.Join(t.TempDir(), "w")
		gitOut(t, filepath.Dir(works[g]), "clone", "-q", cloneURL, works[g])
	}
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for g, work := range works {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				writeFiles(t, work, map[string]string{fmt.Sprintf("notes/g%d-%d.txt", g, i): "note\n"})
				if out, err := gitTry(work, "add", "-A"); err != nil {
					errs <- fmt.Errorf("add: %v %s", err, out)
					return
				}
				if out, err := gitTry(work, "commit", "-q", "-m", fmt.Sprintf("note %d/%d", g, i)); err != nil {
					errs <- fmt.Errorf("commit: %v %s", err, out)
					return
				}
				for try := 0; ; try++ {
					if _, err := gitTry(work, "push", "-q", "origin", "HEAD:main"); err == nil {
						break
					}
					if try > 50 {
						errs <- errors.New("push never landed")
						return
					}
					if out, err := gitTry(work, "pull", "-q", "--rebase", "origin", "main"); err != nil {
						errs <- fmt.Errorf("pull: %v %s", err, out)
						return
					}
				}
			}
		}()
	}
	var res *Result
	var ferr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, ferr = s.Fire(context.Background(), remote, "weekday-morning", fire,
			FireOptions{Author: bot, Backoff: gitrepo.Backoff{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	if res.NoChange || res.From != 2 || res.To != 4 || res.Commit == "" {
		t.Fatalf("result %+v", res)
	}
	t.Logf("fired in %d attempt(s)", res.Attempts)
	commits := scheduleCommits(t, bare)
	if len(commits) != 1 {
		t.Fatalf("%d schedule commits, want 1", len(commits))
	}
	c := commits[0]
	if v, _ := c.Trailer(TrailerFireTime); v != fire.UTC().Format(time.RFC3339) {
		t.Fatalf("Fire-Time %q", v)
	}
	if v, _ := c.Trailer(TrailerID); v != "weekday-morning" {
		t.Fatalf("Schedule-Id %q", v)
	}
	for _, w := range []string{"weekday-morning", "2 → 4", "Argo CD sync delay 3m0s", "cold start         5m36s", "margin             6m0s",
		"overlays/prod/scaling.yaml ScaledObject/vllm-qwen spec.minReplicaCount", "08:45 MSK"} {
		if !strings.Contains(c.Message, w) {
			t.Errorf("message lacks %q:\n%s", w, c.Message)
		}
	}
	if n := strings.Count(gitOut(t, bare, "log", "--oneline", "main"), "\n") + 1; n != 1+15+1 {
		t.Fatalf("%d commits on main, want 17", n)
	}
	fsck(t, bare)

	// Only the field's line changed; its comments survived.
	diff := gitOut(t, bare, "diff", "-U0", c.Hash+"~1", c.Hash)
	var changed []string
	for _, l := range strings.Split(diff, "\n") {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
			changed = append(changed, l)
		}
	}
	want := []string{"-  minReplicaCount: 2 # keep >= 2 in prod", "+  minReplicaCount: 4 # keep >= 2 in prod"}
	if strings.Join(changed, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff:\n%s", diff)
	}
	snap := headSnapshot(t, bare)
	if !strings.Contains(string(snap.Files["overlays/prod/scaling.yaml"]), "  # floor outside peaks; clusters/prod/schedule.yaml raises it\n  minReplicaCount: 4 # keep >= 2 in prod\n") {
		t.Fatalf("comments lost:\n%s", snap.Files["overlays/prod/scaling.yaml"])
	}

	// The result renders, with the new floor.
	src, err := render.FromSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	out, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range out.Objects {
		if o.GetKind() == "ScaledObject" && o.GetName() == "vllm-qwen" {
			v, _, _ := unstructuredInt(o.Object, "spec", "minReplicaCount")
			found = v == 4
		}
	}
	if !found {
		t.Fatal("rendered vllm-qwen ScaledObject does not have minReplicaCount 4")
	}
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	v, ok := cur.(int64)
	return v, ok, nil
}

func TestFireTwiceOneCommit(t *testing.T) {
	bare := newBare(t, projectFiles(t))
	s := loadProd(t, bare)
	fire := futureFiring(t, s, "payday")
	remote := fileRemote(t, bare)
	r1, err := s.Fire(context.Background(), remote, "payday", fire, FireOptions{Author: bot})
	if err != nil || r1.Commit == "" || r1.From != 3 || r1.To != 6 {
		t.Fatalf("first: %+v %v", r1, err)
	}
	// Same fire time again, from a fresh remote (another process): nothing.
	r2, err := s.Fire(context.Background(), fileRemote(t, bare), "payday", fire, FireOptions{Author: bot})
	if err != nil || !r2.NoChange || !strings.Contains(r2.Reason, "already fired in "+r1.Commit) {
		t.Fatalf("second: %+v %v", r2, err)
	}
	// A different fire time of the same peak: the value is already at the target: no commit.
	r3, err := s.Fire(context.Background(), remote, "payday", fire.AddDate(0, 1, 0), FireOptions{Author: bot})
	if err != nil || !r3.NoChange || !strings.Contains(r3.Reason, "already 6") {
		t.Fatalf("third: %+v %v", r3, err)
	}
	if n := len(scheduleCommits(t, bare)); n != 1 {
		t.Fatalf("%d schedule commits", n)
	}
}

func TestScaleDownReverts(t *testing.T) {
	files := projectFiles(t)
	commentedScaling(t, files)
	bare := newBare(t, files)
	s := loadProd(t, bare)
	fire := futureFiring(t, s, "weekday-morning")
	remote := fileRemote(t, bare)
	orig := headSnapshot(t, bare).Files["overlays/prod/scaling.yaml"]
	up, err := s.Fire(context.Background(), remote, "weekday-morning", fire, FireOptions{Author: bot})
	if err != nil {
		t.Fatal(err)
	}
	// Someone edits another line of the same file meanwhile: the revert keeps it.
	pushScalingEdit(t, bare, "maxReplicaCount: 4", "maxReplicaCount: 5", "llama max 5")

	down, err := s.ScaleDown(context.Background(), remote, "weekday-morning", fire, FireOptions{Author: bot})
	if err != nil {
		t.Fatal(err)
	}
	if down.NoChange || down.Commit == "" || !strings.HasPrefix(down.Reason, "reverted "+up.Commit) {
		t.Fatalf("scale-down %+v", down)
	}
	got := string(headSnapshot(t, bare).Files["overlays/prod/scaling.yaml"])
	if want := strings.Replace(string(orig), "maxReplicaCount: 4", "maxReplicaCount: 5", 1); got != want {
		t.Fatalf("after scale-down:\n%s\nwant\n%s", got, want)
	}
	cs := scheduleCommits(t, bare)
	if len(cs) != 2 || !strings.HasPrefix(cs[0].Subject, `Revert "schedule: scale`) {
		t.Fatalf("commits %+v", cs)
	}
	if v, _ := cs[0].Trailer(TrailerPhase); v != "scale-down" {
		t.Fatalf("phase %q", v)
	}
	// Again: nothing.
	again, err := s.ScaleDown(context.Background(), remote, "weekday-morning", fire, FireOptions{Author: bot})
	if err != nil || !again.NoChange {
		t.Fatalf("again %+v %v", again, err)
	}
	fsck(t, bare)
}

func TestScaleDownRestoresWhenRevertConflicts(t *testing.T) {
	files := projectFiles(t)
	commentedScaling(t, files)
	bare := newBare(t, files)
	s := loadProd(t, bare)
	fire := futureFiring(t, s, "weekday-morning")
	remote := fileRemote(t, bare)
	if _, err := s.Fire(context.Background(), remote, "weekday-morning", fire, FireOptions{Author: bot}); err != nil {
		t.Fatal(err)
	}
	// A human rewords the comment on the very line the scale-up changed: revert is refused.
	pushScalingEdit(t, bare, "# keep >= 2 in prod", "# never below 2 in prod", "reword")

	down, err := s.ScaleDown(context.Background(), remote, "weekday-morning", fire, FireOptions{Author: bot})
	if err != nil {
		t.Fatal(err)
	}
	if down.NoChange || !strings.HasPrefix(down.Reason, "restored 2") {
		t.Fatalf("scale-down %+v", down)
	}
	got := string(headSnapshot(t, bare).Files["overlays/prod/scaling.yaml"])
	if !strings.Contains(got, "  minReplicaCount: 2 # never below 2 in prod\n") {
		t.Fatalf("after scale-down:\n%s", got)
	}
	cs := scheduleCommits(t, bare)
	if v, _ := cs[0].Trailer(TrailerPhase); len(cs) != 2 || v != "scale-down" {
		t.Fatalf("commits %+v", cs)
	}
	fsck(t, bare)
}

func TestFireLateGivesDeadlineError(t *testing.T) {
	bare := newBare(t, projectFiles(t))
	s := loadProd(t, bare)
	// A firing whose peak started 5 minutes ago (missed while down): it still lands, late.
	fire := time.Now().Add(-5*time.Minute - s.Lead.Total)
	res, err := s.Fire(context.Background(), fileRemote(t, bare), "weekday-morning", fire, FireOptions{Author: bot})
	var de *DeadlineError
	if !errors.As(err, &de) || !de.Landed || res.Commit == "" {
		t.Fatalf("result %+v, error %v", res, err)
	}
	if !strings.Contains(err.Error(), "replicas will be late") {
		t.Fatal(err)
	}
}

func TestRunnerTick(t *testing.T) {
	bare := newBare(t, projectFiles(t))
	s := loadProd(t, bare)
	msk := mustLoc(t, "Europe/Moscow")
	r := &Runner{Schedule: s, Remote: fileRemote(t, bare), Options: FireOptions{Author: bot, Now: time.Now}}
	// Down from 08:00 to 09:30 on Monday 2027-04-05: the scale-up is made late.
	r.LastRun = time.Date(2027, 4, 5, 8, 0, 0, 0, msk)
	evs := r.Tick(context.Background(), time.Date(2027, 4, 5, 9, 30, 0, 0, msk))
	if len(evs) != 1 || evs[0].Result == nil || evs[0].Result.Commit == "" {
		t.Fatalf("events %+v", evs)
	}
	// The daemon's wall clock is 2026, before the deadline: no DeadlineError.
	if evs[0].Err != nil {
		t.Fatal(evs[0].Err)
	}
	evs = r.Tick(context.Background(), time.Date(2027, 4, 5, 12, 0, 30, 0, msk))
	if len(evs) != 1 || evs[0].Firing.Phase != ScaleDown || evs[0].Err != nil || evs[0].Result.Commit == "" {
		t.Fatalf("events %+v", evs)
	}
	if n := len(scheduleCommits(t, bare)); n != 2 {
		t.Fatalf("%d schedule commits", n)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := osReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkFireToPushed measures a scale-up from Fire to the push confirmed, on a file://
// bare repository holding the project's manifests. Each iteration fires a new occurrence
// (alternating targets' values so each one commits).
func BenchmarkFireToPushed(b *testing.B) {
	files := projectFiles(b)
	bare := newBare(b, files)
	s, err := Load(headSnapshot(b, bare), "prod")
	if err != nil {
		b.Fatal(err)
	}
	remote := fileRemote(b, bare)
	p := s.Peak("weekday-morning")
	start, _ := p.NextStart(time.Now().Add(24 * time.Hour))
	work := clone(b, bare)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Put the floor back to 2 (as a scale-down would) so the next fire commits.
		if i > 0 {
			gitOut(b, work, "pull", "-q", "origin", "main")
			path := filepath.Join(work, "overlays/prod/scaling.yaml")
			c, _ := osReadFile(path)
			writeFiles(b, work, map[string]string{"overlays/prod/scaling.yaml": strings.Replace(string(c), "minReplicaCount: 4", "minReplicaCount: 2", 1)})
			gitOut(b, work, "commit", "-q", "-am", "reset")
			gitOut(b, work, "push", "-q", "origin", "HEAD:main")
		}
		fire := start.AddDate(0, 0, 7*i).Add(-s.Lead.Total)
		b.StartTimer()
		res, err := s.Fire(context.Background(), remote, "weekday-morning", fire, FireOptions{Author: bot})
		if err != nil || res.Commit == "" {
			b.Fatalf("fire: %+v %v", res, err)
		}
	}
}

// TestRunnerRetriesFailedFirings: Git is down when a scale-up is due and back before the peak:
// the retry lands it. A scale-down that fails is retried until it lands. Down across a whole
// peak: the scale-up is reported missed, naming the peak, and nothing is committed late.
func TestRunnerRetriesFailedFirings(t *testing.T) {
	bare := newBare(t, projectFiles(t))
	s := loadProd(t, bare)
	msk := mustLoc(t, "Europe/Moscow")
	r := &Runner{Schedule: s, Remote: fileRemote(t, bare), Options: FireOptions{Author: bot, Now: time.Now}}
	down := func() {
		if err := os.Rename(bare, bare+".down"); err != nil {
			t.Fatal(err)
		}
	}
	up := func() {
		if err := os.Rename(bare+".down", bare); err != nil {
			t.Fatal(err)
		}
	}
	at := func(day, h, m int) time.Time { return time.Date(2027, 4, day, h, m, 0, 0, msk) }
	// Pushes retry until a deadline in 2027; with Git down, each Tick gives up when its context
	// ends (the daemon's Runner retries on its next wake).
	r.Options.Backoff = gitrepo.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	tick := func(now time.Time) []Event {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return r.Tick(ctx, now)
	}

	r.LastRun = at(5, 8, 0) // Monday
	down()
	if evs := tick(at(5, 8, 50)); len(evs) != 1 || evs[0].Err == nil {
		t.Fatalf("scale-up with Git down: events %+v", evs)
	}
	up()
	if evs := tick(at(5, 8, 51)); len(evs) != 1 || evs[0].Err != nil || evs[0].Result == nil || evs[0].Result.Commit == "" {
		t.Fatalf("retried scale-up: events %+v", evs)
	}
	down()
	if evs := tick(at(5, 12, 1)); len(evs) != 1 || evs[0].Firing.Phase != ScaleDown || evs[0].Err == nil {
		t.Fatalf("scale-down with Git down: events %+v", evs)
	}
	up()
	if evs := tick(at(5, 12, 2)); len(evs) != 1 || evs[0].Firing.Phase != ScaleDown || evs[0].Err != nil {
		t.Fatalf("retried scale-down: events %+v", evs)
	}
	if n := len(scheduleCommits(t, bare)); n != 2 {
		t.Fatalf("%d schedule commits after Monday, want 2", n)
	}

	r.LastRun = at(6, 8, 0) // Tuesday: down from before the fire time until after the peak
	down()
	tick(at(6, 8, 50))
	evs := tick(at(6, 12, 5))
	var missed *MissedError
	for _, e := range evs {
		if errors.As(e.Err, &missed) {
			break
		}
	}
	if missed == nil || missed.Peak != "weekday-morning" || !strings.Contains(missed.Error(), "missed") {
		t.Fatalf("no missed-peak error naming the peak: events %+v", evs)
	}
	up()
	tick(at(6, 12, 10))
	if cs := scheduleCommits(t, bare); len(cs) != 2 {
		for _, c := range cs {
			t.Log(c.Subject)
		}
		t.Errorf("%d schedule commits after Tuesday, want still 2: nothing is committed for a missed peak", len(cs))
	}
}

// overlapping is prod's schedule with a payday peak on qwen's minimum (09:00, warm 7, for
// paydayHours) on the day of a future weekday-morning firing, in a bare repository of its own.
func overlapping(t *testing.T, paydayHours int) (s *Schedule, bare string, fire time.Time, day time.Time, field func() string) {
	t.Helper()
	files := projectFiles(t)
	commentedScaling(t, files)
	first, err := Parse(Path("prod"), []byte(files[Path("prod")]))
	if err != nil {
		t.Fatal(err)
	}
	fire = futureFiring(t, first, "weekday-morning")
	start := fire.Add(first.Lead.Total).In(first.Peak("weekday-morning").Location)
	day = start.Add(-9 * time.Hour)
	files[Path("prod")] += fmt.Sprintf(`
  - name: payday-qwen
    recurrence:
      dates: [%s]
      at: "09:00"
      timeZone: Europe/Moscow
    duration: %dh
    target: {path: overlays/prod/scaling.yaml, kind: ScaledObject, name: vllm-qwen, field: spec.minReplicaCount}
    warm: 7
`, start.Format(time.DateOnly), paydayHours)
	bare = newBare(t, files)
	field = func() string {
		m := regexp.MustCompile(`minReplicaCount: (\d+) # keep >= 2 in prod`).FindStringSubmatch(string(headSnapshot(t, bare).Files["overlays/prod/scaling.yaml"]))
		if m == nil {
			t.Fatal("qwen's minReplicaCount line is gone")
		}
		return m[1]
	}
	return loadProd(t, bare), bare, fire, day, field
}

// clockAt is FireOptions whose clock reads hour h of day.
func clockAt(day time.Time, h int) FireOptions {
	return FireOptions{Author: bot, Now: func() time.Time { return day.Add(time.Duration(h) * time.Hour) }}
}

// Two peaks raise one field at once: weekday-morning (09:00-12:00, to 4) and a payday on the same
// day (09:00-18:00, to 7), the morning fired first. At 12:00 the morning's scale-down leaves the
// field alone (the payday changed it since). At 18:00 the payday's scale-down restores 2, the
// field's own value: a revert of its scale-up would give back the morning's 4, after the morning
// ended, and nothing would ever lower it again.
func TestOverlappingPeaksOfOneFieldComposeOnScaleDown(t *testing.T) {
	s, bare, fire, day, field := overlapping(t, 9)
	remote := fileRemote(t, bare)
	for _, peak := range []string{"weekday-morning", "payday-qwen"} {
		if _, err := s.Fire(context.Background(), remote, peak, fire, FireOptions{Author: bot}); err != nil {
			t.Fatal(err)
		}
	}
	if got := field(); got != "7" {
		t.Fatalf("both fired: minReplicaCount %s, want 7", got)
	}
	morning, err := s.ScaleDown(context.Background(), remote, "weekday-morning", fire, clockAt(day, 12))
	if err != nil {
		t.Fatal(err)
	}
	if !morning.NoChange || field() != "7" {
		t.Fatalf("morning's scale-down at 12:00: %+v, field %s; want it left alone at 7", morning, field())
	}
	payday, err := s.ScaleDown(context.Background(), remote, "payday-qwen", fire, clockAt(day, 18))
	if err != nil {
		t.Fatal(err)
	}
	if payday.NoChange || field() != "2" {
		t.Fatalf("payday's scale-down at 18:00: %+v, field %s; want 2", payday, field())
	}
	if !strings.Contains(payday.Reason, "weekday-morning (2 → 4, ended)") {
		t.Errorf("reason %q does not name the ended peak", payday.Reason)
	}
	fsck(t, bare)
}

// The higher peak fires first and ends first (a payday of one hour): the morning's scale-up
// commits nothing (the field is at 7), so the payday's scale-down gives back 2, not the morning's
// 4, which no scale-down of the morning would ever lower.
func TestOverlappingPeakThatCommittedNothingIsNotHeld(t *testing.T) {
	s, bare, fire, day, field := overlapping(t, 1)
	remote := fileRemote(t, bare)
	for _, peak := range []string{"payday-qwen", "weekday-morning"} {
		if _, err := s.Fire(context.Background(), remote, peak, fire, FireOptions{Author: bot}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ScaleDown(context.Background(), remote, "payday-qwen", fire, clockAt(day, 10)); err != nil {
		t.Fatal(err)
	}
	if got := field(); got != "2" {
		t.Fatalf("after the payday at 10:00: %s, want 2", got)
	}
	morning, err := s.ScaleDown(context.Background(), remote, "weekday-morning", fire, clockAt(day, 12))
	if err != nil || !morning.NoChange || field() != "2" {
		t.Fatalf("morning's scale-down: %+v %v, field %s", morning, err, field())
	}
}

// An earlier morning's raise, long reverted, is not followed back: someone set the field's own
// value to 4 since, and the payday's scale-down gives back that 4.
func TestScaleDownDoesNotFollowAnEarlierOccurrence(t *testing.T) {
	s, bare, fire, day, field := overlapping(t, 9)
	remote := fileRemote(t, bare)
	morning := s.Peak("weekday-morning")
	var earlier time.Time
	for d := 1; d < 10; d++ { // the weekday-morning occurrence before this one
		if start, ok := morning.NextStart(fire.Add(s.Lead.Total).AddDate(0, 0, -d).Add(-time.Minute)); ok && start.Before(fire.Add(s.Lead.Total)) {
			earlier = start.Add(-s.Lead.Total)
			break
		}
	}
	if earlier.IsZero() {
		t.Fatal("no earlier morning")
	}
	// The earlier morning may be in the past of the day the test runs: its scale-up then lands
	// late, which is all this test needs of it.
	if _, err := s.Fire(context.Background(), remote, "weekday-morning", earlier, FireOptions{Author: bot}); err != nil {
		if late, ok := errors.AsType[*DeadlineError](err); !ok || !late.Landed {
			t.Fatal(err)
		}
	}
	if _, err := s.ScaleDown(context.Background(), remote, "weekday-morning", earlier, FireOptions{Author: bot}); err != nil {
		t.Fatal(err)
	}
	pushScalingEdit(t, bare, "minReplicaCount: 2 # keep", "minReplicaCount: 4 # keep", "qwen's floor is 4 now")
	if _, err := s.Fire(context.Background(), remote, "payday-qwen", fire, FireOptions{Author: bot}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ScaleDown(context.Background(), remote, "payday-qwen", fire, clockAt(day, 18)); err != nil {
		t.Fatal(err)
	}
	if got := field(); got != "4" {
		t.Fatalf("after the payday: %s, want the floor someone set, 4", got)
	}
}

// pushScalingEdit is a person's commit to overlays/prod/scaling.yaml, pushed with the git CLI:
// the first old replaced by new.
func pushScalingEdit(t *testing.T, bare, old, new, msg string) {
	t.Helper()
	work := clone(t, bare)
	p := filepath.Join(work, "overlays/prod/scaling.yaml")
	writeFiles(t, work, map[string]string{"overlays/prod/scaling.yaml": strings.Replace(readFile(t, p), old, new, 1)})
	gitOut(t, work, "commit", "-q", "-am", msg)
	gitOut(t, work, "push", "-q", "origin", "HEAD:main")
}
