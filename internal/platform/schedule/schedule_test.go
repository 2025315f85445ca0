package schedule

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func prodFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for k, v := range projectFiles(t) {
		out[k] = []byte(v)
	}
	return out
}

// prodSchedule parses the real clusters/prod/schedule.yaml and checks it against the project.
func prodSchedule(t *testing.T) *Schedule {
	t.Helper()
	files := prodFiles(t)
	s, err := Parse(Path("prod"), files[Path("prod")])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckTargets(files); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestProdScheduleLeadTime(t *testing.T) {
	s := prodSchedule(t)
	if len(s.Peaks) != 3 {
		t.Fatalf("peaks: %d", len(s.Peaks))
	}
	// 3m + 336 s (docs/platform.md reference cold start) + 6m.
	want := 3*time.Minute + 336*time.Second + 6*time.Minute
	if s.Lead.Total != want {
		t.Fatalf("lead time %s, want %s (%s)", s.Lead.Total, want, s.Lead)
	}
	if len(s.Lead.ColdStart.Stages) != 4 {
		t.Fatalf("stages: %+v", s.Lead.ColdStart.Stages)
	}
	for _, w := range []string{"argo sync delay 3m0s", "cold start 5m36s", "node provisioning 1m30s", "image pull 1m20s",
		"weights download 2m8s", "load into GPU 38s", "margin 6m0s"} {
		if !strings.Contains(s.Lead.String(), w) {
			t.Errorf("breakdown %q lacks %q", s.Lead, w)
		}
	}
}

func TestPlanWeekdayMorning(t *testing.T) {
	s := prodSchedule(t)
	msk := mustLoc(t, "Europe/Moscow")
	// Friday 2027-04-02 10:00 MSK: next weekday mornings are Mon 5, Tue 6 ... at 08:45:24.
	now := time.Date(2027, 4, 2, 10, 0, 0, 0, msk)
	var got []string
	for _, f := range s.Plan(now, 8) {
		if f.Peak.Name == "weekday-morning" {
			got = append(got, f.FireTime.In(msk).Format("Mon 2006-01-02 15:04:05"))
		}
	}
	want := []string{"Mon 2027-04-05 08:45:24", "Tue 2027-04-06 08:45:24", "Wed 2027-04-07 08:45:24",
		"Thu 2027-04-08 08:45:24", "Fri 2027-04-09 08:45:24"}
	if len(got) < len(want) || strings.Join(got[:len(want)], "|") != strings.Join(want, "|") {
		t.Fatalf("weekday-morning firings %q, want %q", got, want)
	}
	// Plan is sorted by fire time and contains the payday of Friday 9 April (10th is Saturday).
	plan := s.Plan(now, 8)
	for i := 1; i < len(plan); i++ {
		if plan[i].FireTime.Before(plan[i-1].FireTime) {
			t.Fatalf("plan not sorted: %v", plan)
		}
	}
}

func TestExcludedHolidays(t *testing.T) {
	s := prodSchedule(t)
	msk := mustLoc(t, "Europe/Moscow")
	p := s.Peak("weekday-morning")
	start, ok := p.NextStart(time.Date(2026, 12, 31, 12, 0, 0, 0, msk))
	if !ok || !start.Equal(time.Date(2027, 1, 11, 9, 0, 0, 0, msk)) {
		t.Fatalf("first weekday morning after New Year: %s, want Mon 2027-01-11 09:00", start)
	}
}

func TestPaydayWeekendPolicy(t *testing.T) {
	s := prodSchedule(t)
	msk := mustLoc(t, "Europe/Moscow")
	p := s.Peak("payday")
	cases := []struct {
		after time.Time
		want  time.Time
	}{
		// 2027-04-10 is a Saturday: the peak moves to Friday 9 April.
		{time.Date(2027, 4, 1, 0, 0, 0, 0, msk), time.Date(2027, 4, 9, 9, 0, 0, 0, msk)},
		// 25 April 2027 is a Sunday: Friday 23 April.
		{time.Date(2027, 4, 9, 12, 0, 0, 0, msk), time.Date(2027, 4, 23, 9, 0, 0, 0, msk)},
		// A weekday payday stays: Monday 10 May 2027.
		{time.Date(2027, 4, 24, 0, 0, 0, 0, msk), time.Date(2027, 5, 10, 9, 0, 0, 0, msk)},
		// 10 January 2027 is a Sunday and 1–8 January are excluded: Thursday 31 December 2026.
		{time.Date(2026, 12, 26, 0, 0, 0, 0, msk), time.Date(2026, 12, 31, 9, 0, 0, 0, msk)},
		// A day moved back into the previous month is found from that month: 2027-10-10 is a
		// Sunday → Friday 8 October; 2026-10-25 is a Sunday → Friday 23 October.
		{time.Date(2026, 10, 11, 0, 0, 0, 0, msk), time.Date(2026, 10, 23, 9, 0, 0, 0, msk)},
	}
	for _, c := range cases {
		got, ok := p.NextStart(c.after)
		if !ok || !got.Equal(c.want) {
			t.Errorf("payday after %s: %s, want %s", c.after, got.In(msk), c.want)
		}
	}
	// The one-off date.
	ye := s.Peak("year-end-closing")
	got, ok := ye.NextStart(time.Date(2026, 6, 1, 0, 0, 0, 0, msk))
	if !ok || !got.Equal(time.Date(2026, 12, 29, 10, 0, 0, 0, msk)) {
		t.Fatalf("year-end: %s", got)
	}
	if _, ok := ye.NextStart(got); ok {
		t.Fatal("a one-off date fired twice")
	}
}

const dstSchedule = `
leadTime:
  argoSyncDelay: 3m
  coldStart: {nodeProvisioning: 90s, imageSize: 10GB, pullBandwidth: 1Gbit/s, weightsSize: 16GB, downloadBandwidth: 1Gbit/s, loadBandwidth: 2GB/s, engineInit: 30s}
  margin: 6m
peaks:
  - name: berlin
    recurrence: {cron: "0 9 * * *", timeZone: Europe/Berlin}
    duration: 2h
    target: {path: overlays/prod/scaling.yaml, kind: ScaledObject, name: vllm-qwen, field: spec.minReplicaCount}
    warm: 4
  - name: new-york
    recurrence: {daysOfMonth: [6, 8], at: "09:00", timeZone: America/New_York}
    duration: 2h
    target: {path: overlays/prod/scaling.yaml, kind: ScaledObject, name: vllm-llama, field: spec.minReplicaCount}
    warm: 2
`

func TestDSTKeepsLocalTime(t *testing.T) {
	s, err := Parse("dst.yaml", []byte(dstSchedule))
	if err != nil {
		t.Fatal(err)
	}
	berlin, ny := mustLoc(t, "Europe/Berlin"), mustLoc(t, "America/New_York")
	// Europe/Berlin switches to summer time on Sunday 2027-03-28 at 02:00.
	var starts []time.Time
	for _, f := range s.Plan(time.Date(2027, 3, 26, 12, 0, 0, 0, berlin), 10) {
		if f.Peak.Name == "berlin" {
			starts = append(starts, f.Start)
			if lf := f.FireTime.In(berlin).Format("15:04:05"); lf != "08:45:24" {
				t.Errorf("berlin fire time %s local, want 08:45:24", lf)
			}
		}
	}
	wantUTC := []string{"2027-03-27T08:00:00Z", "2027-03-28T07:00:00Z", "2027-03-29T07:00:00Z"}
	for i, w := range wantUTC {
		if got := starts[i].UTC().Format(time.RFC3339); got != w {
			t.Errorf("berlin start %d: %s UTC, want %s", i, got, w)
		}
		if l := starts[i].In(berlin).Format("15:04"); l != "09:00" {
			t.Errorf("berlin start %d: %s local, want 09:00", i, l)
		}
	}
	// America/New_York switches on Sunday 2027-03-14; calendar peaks on the 6th (EST) and the
	// 8th... of April (EDT) stay at 09:00 local.
	p := s.Peak("new-york")
	a, _ := p.NextStart(time.Date(2027, 3, 1, 0, 0, 0, 0, ny))
	b, _ := p.NextStart(time.Date(2027, 3, 31, 0, 0, 0, 0, ny))
	if a.UTC().Format(time.RFC3339) != "2027-03-06T14:00:00Z" || b.UTC().Format(time.RFC3339) != "2027-04-06T13:00:00Z" {
		t.Fatalf("new york starts %s, %s", a.UTC(), b.UTC())
	}
	if a.In(ny).Format("15:04") != "09:00" || b.In(ny).Format("15:04") != "09:00" {
		t.Fatalf("new york local %s, %s", a.In(ny), b.In(ny))
	}
}

func TestDue(t *testing.T) {
	s := prodSchedule(t)
	msk := mustLoc(t, "Europe/Moscow")
	fire := time.Date(2027, 4, 5, 8, 45, 24, 0, msk) // Monday
	// The scheduler was down from 08:00 to 10:00: the peak (09:00-12:00) is still on.
	run, skipped := s.Due(time.Date(2027, 4, 5, 10, 0, 0, 0, msk), time.Date(2027, 4, 5, 8, 0, 0, 0, msk))
	if len(skipped) != 0 || len(run) != 1 || run[0].Peak.Name != "weekday-morning" || !run[0].FireTime.Equal(fire) || !run[0].Late || run[0].Phase != ScaleUp {
		t.Fatalf("due at 10:00: run %+v skipped %+v", run, skipped)
	}
	// On time: no Late.
	run, _ = s.Due(fire.Add(10*time.Second), fire.Add(-50*time.Second))
	if len(run) != 1 || run[0].Late {
		t.Fatalf("due on time: %+v", run)
	}
	// Down from 08:00 to 12:30: the window has passed: skip the scale-up, run the scale-down.
	run, skipped = s.Due(time.Date(2027, 4, 5, 12, 30, 0, 0, msk), time.Date(2027, 4, 5, 8, 0, 0, 0, msk))
	if len(skipped) != 1 || !skipped[0].FireTime.Equal(fire) {
		t.Fatalf("skipped %+v", skipped)
	}
	if len(run) != 1 || run[0].Phase != ScaleDown || !run[0].End.Equal(time.Date(2027, 4, 5, 12, 0, 0, 0, msk)) {
		t.Fatalf("run %+v", run)
	}
	// Nothing twice.
	if run, skipped := s.Due(time.Date(2027, 4, 5, 12, 31, 0, 0, msk), time.Date(2027, 4, 5, 12, 30, 0, 0, msk)); len(run)+len(skipped) != 0 {
		t.Fatalf("due again: %+v %+v", run, skipped)
	}
}

func TestMalformedSchedule(t *testing.T) {
	files := prodFiles(t)
	peak := func(body string) string {
		return "leadTime:\n  margin: 6m\npeaks:\n  - name: p\n" + body
	}
	const target = "    target: {path: overlays/prod/scaling.yaml, kind: ScaledObject, name: vllm-qwen, field: spec.minReplicaCount}\n"
	const rec = "    recurrence: {cron: \"0 9 * * 1-5\", timeZone: Europe/Moscow}\n"
	cases := []struct {
		name, yaml string
		line       int
		msg        string
		targets    bool // error from CheckTargets
	}{
		{"bad cron", peak("    recurrence:\n      cron: \"0 25 * * 1-5\"\n      timeZone: Europe/Moscow\n    duration: 3h\n" + target + "    warm: 4\n"), 6, "bad cron", false},
		{"unknown zone", peak("    recurrence:\n      cron: \"0 9 * * 1-5\"\n      timeZone: Europe/Atlantis\n    duration: 3h\n" + target + "    warm: 4\n"), 7, "unknown time zone", false},
		{"shorter than lead", peak(rec + "    duration: 10m\n" + target + "    warm: 4\n"), 6, "shorter than its lead time", false},
		{"weekend policy", peak("    recurrence:\n      daysOfMonth: [10]\n      weekendPolicy: sometimes\n      at: \"09:00\"\n      timeZone: UTC\n    duration: 3h\n" + target + "    warm: 4\n"), 7, "unknown weekendPolicy", false},
		{"bad exclude", peak(rec + "    exclude: [2027-13-01]\n    duration: 3h\n" + target + "    warm: 4\n"), 6, "bad date", false},
		{"unknown field", peak(rec + "    duraton: 3h\n" + target + "    warm: 4\n"), 6, "unknown field \"duraton\"", false},
		{"empty duration", peak(rec + "    duration: \"\"\n" + target + "    warm: 4\n"), 6, "empty duration", false},
		{"invalid yaml", "peaks:\n  - name: p\n    duration: 3h: 4\n", 3, "invalid YAML", false},
		{"unknown file", peak(rec + "    duration: 3h\n    target: {path: overlays/prod/nope.yaml, kind: ScaledObject, name: vllm-qwen, field: spec.minReplicaCount}\n    warm: 4\n"), 7, "target file overlays/prod/nope.yaml not found", true},
		{"unknown object", peak(rec + "    duration: 3h\n    target:\n      path: overlays/prod/scaling.yaml\n      kind: ScaledObject\n      name: vllm-gemma\n      field: spec.minReplicaCount\n    warm: 4\n"), 10, "no ScaledObject named vllm-gemma", true},
		{"unknown field in object", peak(rec + "    duration: 3h\n    target: {path: overlays/prod/scaling.yaml, kind: ScaledObject, name: vllm-qwen, field: spec.minReplicas}\n    warm: 4\n"), 7, "has no field spec.minReplicas", true},
		{"warm above max", peak(rec + "    duration: 3h\n" + target + "    warm: 9\n"), 8, "exceeds the object's maximum 8", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse("clusters/prod/schedule.yaml", []byte(c.yaml))
			if c.targets {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				err = s.CheckTargets(files)
			}
			var el ErrorList
			if !errors.As(err, &el) {
				t.Fatalf("error %v (%T), want ErrorList", err, err)
			}
			want := "clusters/prod/schedule.yaml:" + strconv.Itoa(c.line) + ": "
			for _, e := range el {
				if strings.HasPrefix(e.Error(), want) && strings.Contains(e.Error(), c.msg) {
					return
				}
			}
			t.Fatalf("error %q, want one with prefix %q and %q", err, want, c.msg)
		})
	}
}
