package schedule

import (
	"path"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// peak checks one peak; nil when it has errors.
func (v *validator) peak(n at[peakYAML], lead LeadTime) *Peak {
	before := len(v.errs)
	f := n.V
	pk := &Peak{Line: n.Line, Name: f.Name.V}
	if pk.Name == "" {
		errAt(v, n, "peak without a name")
	} else if strings.ContainsAny(pk.Name, "\n\r:") {
		errAt(v, f.Name, "peak name %q must not contain a colon or a newline", pk.Name)
	}
	v.recurrence(pk, n)
	for _, e := range f.Exclude {
		if dr, ok := v.dateRange(e); ok {
			pk.Exclude = append(pk.Exclude, dr)
		}
	}
	if d, ok := v.duration(f.Duration, "duration"); ok {
		pk.Duration = d
		if d == 0 {
			errAt(v, f.Duration, "duration must be positive")
		} else if d < lead.Total {
			errAt(v, f.Duration, "peak %q lasts %s, shorter than its lead time %s", pk.Name, d, lead)
		}
	} else if !f.Duration.set() {
		errAt(v, n, "peak %q has no duration", pk.Name)
	}
	v.target(pk, n)
	pk.warmLine = f.Warm.Line
	if f.Warm.ok() {
		if f.Warm.V < 1 {
			errAt(v, f.Warm, "warm must be at least 1")
		}
		pk.Warm = f.Warm.V
	} else if !f.Warm.set() {
		errAt(v, n, "peak %q has no warm replica count", pk.Name)
	}
	if len(v.errs) > before {
		return nil
	}
	return pk
}

// recurrence checks the peak's recurrence: a time zone, and either a cron expression or
// calendar rules.
func (v *validator) recurrence(pk *Peak, n at[peakYAML]) {
	rec := n.V.Recurrence
	r := rec.V
	if !rec.set() {
		errAt(v, n, "peak %q has no recurrence", pk.Name)
	}
	pk.TimeZone = r.TimeZone.V
	pk.Location = time.UTC
	if pk.TimeZone == "" {
		if rec.set() {
			errAt(v, rec, "recurrence needs a timeZone (e.g. Europe/Moscow)")
		}
	} else if loc, err := time.LoadLocation(pk.TimeZone); err != nil || pk.TimeZone == "Local" {
		errAt(v, r.TimeZone, "unknown time zone %q", pk.TimeZone)
	} else {
		pk.Location = loc
	}
	calendar := r.DaysOfMonth != nil || r.Dates != nil
	switch {
	case r.Cron.set():
		pk.Cron = r.Cron.V
		if calendar || r.At.set() || r.WeekendPolicy.set() {
			errAt(v, r.Cron, "recurrence has either cron or calendar rules (daysOfMonth, dates, at, weekendPolicy), not both")
		}
		if strings.Contains(pk.Cron, "TZ=") {
			errAt(v, r.Cron, "cron %q: put the time zone in timeZone, not in the expression", pk.Cron)
		} else if sched, err := cronParser.Parse(pk.Cron); err != nil {
			errAt(v, r.Cron, "bad cron %q: %v", pk.Cron, err)
		} else if spec, ok := sched.(*cron.SpecSchedule); ok {
			spec.Location = pk.Location
			pk.sched = spec
		} else {
			errAt(v, r.Cron, "cron %q: descriptors (@every...) are not supported", pk.Cron)
		}
	case calendar:
		v.calendar(pk, rec)
	case rec.set():
		errAt(v, rec, "recurrence needs cron, or daysOfMonth/dates with at")
	}
}

// calendar checks the calendar rules of a recurrence: days of month, dates, weekend policy,
// time of day.
func (v *validator) calendar(pk *Peak, rec at[recurrenceYAML]) {
	r := rec.V
	for _, d := range r.DaysOfMonth {
		if !d.ok() {
			continue
		}
		if d.V < 1 || d.V > 31 {
			errAt(v, d, "day of month %d is not in 1..31", d.V)
			continue
		}
		pk.DaysOfMonth = append(pk.DaysOfMonth, int(d.V))
	}
	for _, d := range r.Dates {
		dt, err := parseDate(d.V)
		if err != nil {
			errAt(v, d, "dates: %v", err)
			continue
		}
		pk.Dates = append(pk.Dates, dt)
	}
	pk.WeekendPolicy = WeekendNone
	if w := r.WeekendPolicy; w.set() {
		pk.WeekendPolicy = w.V
		if !slices.Contains(policies, pk.WeekendPolicy) {
			errAt(v, w, "unknown weekendPolicy %q (want %s)", pk.WeekendPolicy, strings.Join(policies, ", "))
		}
	}
	if !r.At.set() {
		errAt(v, rec, "calendar recurrence needs at: \"HH:MM\"")
	} else if t, err := time.Parse("15:04", r.At.V); err != nil {
		errAt(v, r.At, "at: bad time of day %q (want HH:MM)", r.At.V)
	} else {
		pk.At = Clock{t.Hour(), t.Minute()}
	}
}

// target checks the peak's target: every key but namespace, and a clean relative path.
func (v *validator) target(pk *Peak, n at[peakYAML]) {
	tn := n.V.Target
	if !tn.set() {
		errAt(v, n, "peak %q has no target", pk.Name)
		return
	}
	t := tn.V
	pk.Target = Target{Path: t.Path.V, Kind: t.Kind.V, Name: t.Name.V, Namespace: t.Namespace.V, Field: t.Field.V,
		Line: tn.Line, lines: map[string]int{}}
	for k, a := range map[string]at[string]{"path": t.Path, "kind": t.Kind, "name": t.Name, "namespace": t.Namespace, "field": t.Field} {
		if a.set() {
			pk.Target.lines[k] = a.Line
		}
	}
	for _, req := range []struct{ key, v string }{{"path", pk.Target.Path}, {"kind", pk.Target.Kind}, {"name", pk.Target.Name}, {"field", pk.Target.Field}} {
		if req.v == "" {
			errAt(v, tn, "target needs %s", req.key)
		}
	}
	if p := pk.Target.Path; p != "" && (path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "../")) {
		errAt(v, t.Path, "target path %q must be a clean path relative to the repository root", p)
	}
}
