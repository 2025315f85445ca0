package schedule

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"

	"github.com/llm-gitops/platform/internal/capacity"
)

// parser collects errors with positions.
type parser struct {
	file string
	errs ErrorList
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

// fields returns the key → value nodes of a mapping, reporting unknown keys.
func (p *parser) fields(n *yaml.Node, what string, known ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n == nil {
		return out
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s must be a mapping", what)
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ok := false
		for _, kn := range known {
			ok = ok || kn == k.Value
		}
		if !ok {
			p.errorf(k, "unknown field %q in %s (known: %s)", k.Value, what, strings.Join(known, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.errorf(k, "duplicate field %q in %s", k.Value, what)
		}
		out[k.Value] = v
	}
	return out
}

func (p *parser) str(n *yaml.Node, what string) string {
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, "%s must be a string", what)
		return ""
	}
	return n.Value
}

func (p *parser) duration(n *yaml.Node, what string) (time.Duration, bool) {
	s := p.str(n, what)
	if n == nil || s == "" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.errorf(n, "%s: bad duration %q (want e.g. 3m, 90s, 2h30m)", what, s)
		return 0, false
	}
	return d, true
}

func (p *parser) integer(n *yaml.Node, what string) (int64, bool) {
	if n == nil {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Kind != yaml.ScalarNode || err != nil {
		p.errorf(n, "%s must be an integer, not %q", what, n.Value)
		return 0, false
	}
	return v, true
}

// list returns the items of a sequence (a scalar counts as a one-item list).
func (p *parser) list(n *yaml.Node, what string) []*yaml.Node {
	switch {
	case n == nil:
		return nil
	case n.Kind == yaml.SequenceNode:
		return n.Content
	case n.Kind == yaml.ScalarNode:
		return []*yaml.Node{n}
	}
	p.errorf(n, "%s must be a list", what)
	return nil
}

// parseOld is the hand parser Parse replaced: it parses a schedule file. file names it in errors; every error carries its line. Targets
// are not checked against a repository (see CheckTargets). The error is an ErrorList.
func parseOld(file string, data []byte) (*Schedule, error) {
	p := &parser{file: file}
	s := &Schedule{File: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line := 0
		var te *yaml.TypeError
		msg := err.Error()
		if !errors.As(err, &te) {
			// yaml: line N: message
			if rest, ok := strings.CutPrefix(msg, "yaml: line "); ok {
				if n, m, ok := strings.Cut(rest, ":"); ok {
					if v, err := strconv.Atoi(n); err == nil {
						line, msg = v, strings.TrimSpace(m)
					}
				}
			}
		}
		return nil, ErrorList{{File: file, Line: line, Msg: "invalid YAML: " + msg}}
	}
	if len(doc.Content) == 0 {
		return nil, ErrorList{{File: file, Msg: "empty schedule"}}
	}
	root := p.fields(doc.Content[0], "schedule", "leadTime", "peaks")
	s.Lead, s.ColdStart = p.leadTime(root["leadTime"])
	seen := map[string]bool{}
	if root["peaks"] == nil {
		p.errorf(doc.Content[0], "no peaks")
	}
	for _, n := range p.list(root["peaks"], "peaks") {
		pk := p.peak(n, s.Lead)
		if pk == nil {
			continue
		}
		if seen[pk.Name] {
			p.errorf(n, "duplicate peak name %q", pk.Name)
		}
		seen[pk.Name] = true
		s.Peaks = append(s.Peaks, pk)
	}
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		return nil, p.errs
	}
	return s, nil
}

// dateRange parses "2027-01-01", "2027-01-01..2027-01-08" or {from: ..., to: ...}.
func (p *parser) dateRange(n *yaml.Node) (DateRange, bool) {
	var from, to string
	if n.Kind == yaml.MappingNode {
		f := p.fields(n, "exclude range", "from", "to")
		from, to = p.str(f["from"], "from"), p.str(f["to"], "to")
	} else {
		s := p.str(n, "exclude")
		var ok bool
		if from, to, ok = strings.Cut(s, ".."); !ok {
			to = from
		}
	}
	f, err := parseDate(from)
	if err != nil {
		p.errorf(n, "exclude: %v", err)
		return DateRange{}, false
	}
	t, err := parseDate(to)
	if err != nil {
		p.errorf(n, "exclude: %v", err)
		return DateRange{}, false
	}
	if t.before(f) {
		p.errorf(n, "exclude: range %s..%s ends before it starts", f, t)
		return DateRange{}, false
	}
	return DateRange{f, t}, true
}

func (p *parser) leadTime(n *yaml.Node) (LeadTime, capacity.ColdStart) {
	l := LeadTime{ArgoSyncDelay: DefaultArgoSyncDelay}
	cs := capacity.DefaultColdStart()
	f := p.fields(n, "leadTime", "argoSyncDelay", "coldStart", "margin")
	if d, ok := p.duration(f["argoSyncDelay"], "argoSyncDelay"); ok {
		l.ArgoSyncDelay = d
	}
	if d, ok := p.duration(f["margin"], "margin"); ok {
		l.Margin = d
	}
	c := p.fields(f["coldStart"], "coldStart", "nodeProvisioning", "imageSize", "pullBandwidth",
		"weightsSize", "downloadBandwidth", "loadBandwidth", "loadTime", "engineInit")
	durs := []struct {
		key string
		dst *time.Duration
	}{{"nodeProvisioning", &cs.NodeProvisioning}, {"loadTime", &cs.LoadTime}, {"engineInit", &cs.EngineInit}}
	for _, d := range durs {
		if v, ok := p.duration(c[d.key], d.key); ok {
			*d.dst = v
		}
	}
	if _, ok := c["loadTime"]; ok {
		if _, bw := c["loadBandwidth"]; !bw {
			cs.LoadBandwidth = 0 // a declared load time replaces the default bandwidth
		}
	}
	sizes := []struct {
		key string
		dst *int64
	}{{"imageSize", &cs.ImageBytes}, {"weightsSize", &cs.WeightsBytes}}
	for _, sz := range sizes {
		if n := c[sz.key]; n != nil {
			v, err := capacity.ParseBytes(p.str(n, sz.key))
			if err != nil {
				p.errorf(n, "%s: %v", sz.key, err)
				continue
			}
			*sz.dst = v
		}
	}
	bws := []struct {
		key string
		dst *float64
	}{{"pullBandwidth", &cs.PullBandwidth}, {"downloadBandwidth", &cs.DownloadBandwidth}, {"loadBandwidth", &cs.LoadBandwidth}}
	for _, bw := range bws {
		if n := c[bw.key]; n != nil {
			v, err := capacity.ParseBandwidth(p.str(n, bw.key))
			if err != nil {
				p.errorf(n, "%s: %v", bw.key, err)
				continue
			}
			*bw.dst = v
		}
	}
	est, err := cs.Estimate()
	if err != nil {
		p.errorf(n, "leadTime.coldStart: %v", err)
	}
	l.ColdStart = est
	l.Total = l.ArgoSyncDelay + est.Total + l.Margin
	return l, cs
}

func (p *parser) peak(n *yaml.Node, lead LeadTime) *Peak {
	before := len(p.errs)
	f := p.fields(n, "peak", "name", "recurrence", "exclude", "duration", "target", "warm")
	pk := &Peak{Line: n.Line, Name: p.str(f["name"], "name")}
	if pk.Name == "" {
		p.errorf(n, "peak without a name")
	} else if strings.ContainsAny(pk.Name, "\n\r:") {
		p.errorf(f["name"], "peak name %q must not contain a colon or a newline", pk.Name)
	}

	r := p.fields(f["recurrence"], "recurrence", "cron", "timeZone", "daysOfMonth", "weekendPolicy", "dates", "at")
	if f["recurrence"] == nil {
		p.errorf(n, "peak %q has no recurrence", pk.Name)
	}
	pk.TimeZone = p.str(r["timeZone"], "timeZone")
	pk.Location = time.UTC
	if pk.TimeZone == "" {
		if f["recurrence"] != nil {
			p.errorf(f["recurrence"], "recurrence needs a timeZone (e.g. Europe/Moscow)")
		}
	} else if loc, err := time.LoadLocation(pk.TimeZone); err != nil || pk.TimeZone == "Local" {
		p.errorf(r["timeZone"], "unknown time zone %q", pk.TimeZone)
	} else {
		pk.Location = loc
	}
	calendar := r["daysOfMonth"] != nil || r["dates"] != nil
	if c := r["cron"]; c != nil {
		pk.Cron = p.str(c, "cron")
		if calendar || r["at"] != nil || r["weekendPolicy"] != nil {
			p.errorf(c, "recurrence has either cron or calendar rules (daysOfMonth, dates, at, weekendPolicy), not both")
		}
		if strings.Contains(pk.Cron, "TZ=") {
			p.errorf(c, "cron %q: put the time zone in timeZone, not in the expression", pk.Cron)
		} else if sched, err := cronParser.Parse(pk.Cron); err != nil {
			p.errorf(c, "bad cron %q: %v", pk.Cron, err)
		} else if spec, ok := sched.(*cron.SpecSchedule); ok {
			spec.Location = pk.Location
			pk.sched = spec
		} else {
			p.errorf(c, "cron %q: descriptors (@every...) are not supported", pk.Cron)
		}
	} else if calendar {
		for _, d := range p.list(r["daysOfMonth"], "daysOfMonth") {
			if v, ok := p.integer(d, "daysOfMonth"); ok {
				if v < 1 || v > 31 {
					p.errorf(d, "day of month %d is not in 1..31", v)
					continue
				}
				pk.DaysOfMonth = append(pk.DaysOfMonth, int(v))
			}
		}
		for _, d := range p.list(r["dates"], "dates") {
			dt, err := parseDate(p.str(d, "dates"))
			if err != nil {
				p.errorf(d, "dates: %v", err)
				continue
			}
			pk.Dates = append(pk.Dates, dt)
		}
		pk.WeekendPolicy = WeekendNone
		if w := r["weekendPolicy"]; w != nil {
			pk.WeekendPolicy = p.str(w, "weekendPolicy")
			ok := false
			for _, v := range policies {
				ok = ok || v == pk.WeekendPolicy
			}
			if !ok {
				p.errorf(w, "unknown weekendPolicy %q (want %s)", pk.WeekendPolicy, strings.Join(policies, ", "))
			}
		}
		at := r["at"]
		if at == nil {
			p.errorf(f["recurrence"], "calendar recurrence needs at: \"HH:MM\"")
		} else if t, err := time.Parse("15:04", p.str(at, "at")); err != nil {
			p.errorf(at, "at: bad time of day %q (want HH:MM)", at.Value)
		} else {
			pk.At = Clock{t.Hour(), t.Minute()}
		}
	} else if f["recurrence"] != nil {
		p.errorf(f["recurrence"], "recurrence needs cron, or daysOfMonth/dates with at")
	}

	for _, e := range p.list(f["exclude"], "exclude") {
		if dr, ok := p.dateRange(e); ok {
			pk.Exclude = append(pk.Exclude, dr)
		}
	}

	if d, ok := p.duration(f["duration"], "duration"); ok {
		pk.Duration = d
		if d == 0 {
			p.errorf(f["duration"], "duration must be positive")
		} else if d < lead.Total {
			p.errorf(f["duration"], "peak %q lasts %s, shorter than its lead time %s", pk.Name, d, lead)
		}
	} else if f["duration"] == nil {
		p.errorf(n, "peak %q has no duration", pk.Name)
	}

	if tn := f["target"]; tn == nil {
		p.errorf(n, "peak %q has no target", pk.Name)
	} else {
		t := p.fields(tn, "target", "path", "kind", "name", "namespace", "field")
		pk.Target = Target{Path: p.str(t["path"], "path"), Kind: p.str(t["kind"], "kind"), Name: p.str(t["name"], "name"),
			Namespace: p.str(t["namespace"], "namespace"), Field: p.str(t["field"], "field"), Line: tn.Line, lines: map[string]int{}}
		for k, v := range t {
			pk.Target.lines[k] = v.Line
		}
		for _, req := range []struct{ key, v string }{{"path", pk.Target.Path}, {"kind", pk.Target.Kind}, {"name", pk.Target.Name}, {"field", pk.Target.Field}} {
			if req.v == "" {
				p.errorf(tn, "target needs %s", req.key)
			}
		}
		if pk.Target.Path != "" && (path.IsAbs(pk.Target.Path) || path.Clean(pk.Target.Path) != pk.Target.Path || strings.HasPrefix(pk.Target.Path, "../")) {
			p.errorf(t["path"], "target path %q must be a clean path relative to the repository root", pk.Target.Path)
		}
	}
	if f["warm"] != nil {
		pk.warmLine = f["warm"].Line
	}
	if w, ok := p.integer(f["warm"], "warm"); ok {
		if w < 1 {
			p.errorf(f["warm"], "warm must be at least 1")
		}
		pk.Warm = w
	} else if f["warm"] == nil {
		p.errorf(n, "peak %q has no warm replica count", pk.Name)
	}
	if len(p.errs) > before {
		return nil
	}
	return pk
}
