package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/llm-gitops/platform/internal/platform/capacity"
)

// validator checks the semantics of a decoded schedule file and builds the Schedule, collecting
// errors at the lines of the values at fault.
type validator struct {
	file string
	errs ErrorList
}

func (v *validator) errorf(line, col int, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.file, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)})
}

// errAt reports an error at a value's position.
func errAt[T any](v *validator, a at[T], format string, args ...any) {
	v.errorf(a.Line, a.Column, format, args...)
}

func (v *validator) schedule(doc *at[fileYAML]) *Schedule {
	s := &Schedule{}
	s.Lead, s.ColdStart = v.leadTime(doc.V.LeadTime)
	if !doc.V.Peaks.set() {
		errAt(v, *doc, "no peaks")
	}
	seen := map[string]bool{}
	for _, n := range doc.V.Peaks.V {
		pk := v.peak(n, s.Lead)
		if pk == nil {
			continue
		}
		if seen[pk.Name] {
			errAt(v, n, "duplicate peak name %q", pk.Name)
		}
		seen[pk.Name] = true
		s.Peaks = append(s.Peaks, pk)
	}
	return s
}

// duration parses a duration value; false when absent, or empty or bad (both reported).
func (v *validator) duration(a at[string], what string) (time.Duration, bool) {
	if !a.ok() {
		return 0, false
	}
	if strings.TrimSpace(a.V) == "" {
		errAt(v, a, "%s: empty duration (want e.g. 3m, 90s, 2h30m)", what)
		return 0, false
	}
	d, err := time.ParseDuration(a.V)
	if err != nil || d < 0 {
		errAt(v, a, "%s: bad duration %q (want e.g. 3m, 90s, 2h30m)", what, a.V)
		return 0, false
	}
	return d, true
}

func parseDate(s string) (Date, error) {
	t, err := time.Parse("2006-01-02", strings.TrimSpace(s))
	if err != nil {
		return Date{}, fmt.Errorf("bad date %q (want YYYY-MM-DD)", s)
	}
	return dateOf(t), nil
}

// dateRange checks "2027-01-01", "2027-01-01..2027-01-08" or {from: ..., to: ...}.
func (v *validator) dateRange(n at[rangeYAML]) (DateRange, bool) {
	from, to := n.V.From.V, n.V.To.V
	if !n.V.Mapping {
		var ok bool
		if from, to, ok = strings.Cut(from, ".."); !ok {
			to = from
		}
	}
	f, err := parseDate(from)
	if err != nil {
		errAt(v, n, "exclude: %v", err)
		return DateRange{}, false
	}
	t, err := parseDate(to)
	if err != nil {
		errAt(v, n, "exclude: %v", err)
		return DateRange{}, false
	}
	if t.before(f) {
		errAt(v, n, "exclude: range %s..%s ends before it starts", f, t)
		return DateRange{}, false
	}
	return DateRange{f, t}, true
}

func (v *validator) leadTime(n at[leadTimeYAML]) (LeadTime, capacity.ColdStart) {
	l := LeadTime{ArgoSyncDelay: DefaultArgoSyncDelay}
	cs := capacity.DefaultColdStart()
	if d, ok := v.duration(n.V.ArgoSyncDelay, "argoSyncDelay"); ok {
		l.ArgoSyncDelay = d
	}
	if d, ok := v.duration(n.V.Margin, "margin"); ok {
		l.Margin = d
	}
	c := n.V.ColdStart
	for _, d := range []struct {
		key string
		val at[string]
		dst *time.Duration
	}{{"nodeProvisioning", c.NodeProvisioning, &cs.NodeProvisioning}, {"loadTime", c.LoadTime, &cs.LoadTime}, {"engineInit", c.EngineInit, &cs.EngineInit}} {
		if x, ok := v.duration(d.val, d.key); ok {
			*d.dst = x
		}
	}
	if c.LoadTime.set() && !c.LoadBandwidth.set() {
		cs.LoadBandwidth = 0 // a declared load time replaces the default bandwidth
	}
	for _, sz := range []struct {
		key string
		val at[string]
		dst *int64
	}{{"imageSize", c.ImageSize, &cs.ImageBytes}, {"weightsSize", c.WeightsSize, &cs.WeightsBytes}} {
		if sz.val.set() {
			x, err := capacity.ParseBytes(sz.val.V)
			if err != nil {
				errAt(v, sz.val, "%s: %v", sz.key, err)
				continue
			}
			*sz.dst = x
		}
	}
	for _, bw := range []struct {
		key string
		val at[string]
		dst *float64
	}{{"pullBandwidth", c.PullBandwidth, &cs.PullBandwidth}, {"downloadBandwidth", c.DownloadBandwidth, &cs.DownloadBandwidth}, {"loadBandwidth", c.LoadBandwidth, &cs.LoadBandwidth}} {
		if bw.val.set() {
			x, err := capacity.ParseBandwidth(bw.val.V)
			if err != nil {
				errAt(v, bw.val, "%s: %v", bw.key, err)
				continue
			}
			*bw.dst = x
		}
	}
	est, err := cs.Estimate()
	if err != nil {
		errAt(v, n, "leadTime.coldStart: %v", err)
	}
	l.ColdStart = est
	l.Total = l.ArgoSyncDelay + est.Total + l.Margin
	return l, cs
}

var policies = []string{WeekendNone, WeekendSkip, WeekendPreviousBusiness, WeekendNextBusiness}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
