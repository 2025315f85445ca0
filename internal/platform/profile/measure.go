package profile

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Source says which series to read and over which window.
type Source struct {
	// Model and Service select vLLM's series: model_name and the scraped Service's label.
	Model, Service string
	// From and To bound the window; From is rounded up and To down to whole hours of Location.
	From, To time.Time
	Location *time.Location
	// RateWindow is the range of rate() when a replica's throughput is read (default 5m; at
	// least two scrape intervals).
	RateWindow time.Duration
}

// Queries are the PromQL a profile reads, by what it measures. hourly queries run as range
// queries with a step of one hour, ending each hour; the others as instant queries at To.
func (s Source) Queries() map[string]string {
	sel := fmt.Sprintf(`model_name=%q, service=%q`, s.Model, s.Service)
	window := model.Duration(s.To.Sub(s.From)).String()
	rw := model.Duration(s.rateWindow()).String()
	quantile := func(q, metric string) string {
		return fmt.Sprintf(`histogram_quantile(%s, sum by (le) (increase(%s_bucket{%s}[%s])))`, q, metric, sel, window)
	}
	// A pod's throughput over the rate windows in which it had a queue at every sample: the
	// subquery steps at the rate window, and `and on (pod)` keeps a pod's rate only where the
	// least of its queue over that same window was above 0 (a queue only starting does not count).
	saturated := func(counter, extra string) string {
		return fmt.Sprintf(`(sum by (pod) (rate(%s{%s%s}[%s])) and on (pod) (sum by (pod) (min_over_time(vllm:num_requests_waiting{%s}[%s])) > 0))[%s:%s]`,
			counter, sel, extra, rw, sel, rw, window, rw)
	}
	return map[string]string{
		"hourly": fmt.Sprintf(`sum(rate(vllm:request_success_total{%s}[1h]))`, sel),
		// offset 1s: the sample at the hour's end belongs to the next hour
		"queue":            fmt.Sprintf(`sum(avg_over_time(vllm:num_requests_waiting{%s}[1h] offset 1s))`, sel),
		"promptP50":        quantile("0.5", "vllm:request_prompt_tokens"),
		"promptP95":        quantile("0.95", "vllm:request_prompt_tokens"),
		"responseP50":      quantile("0.5", "vllm:request_generation_tokens"),
		"responseP95":      quantile("0.95", "vllm:request_generation_tokens"),
		"ttftP50":          quantile("0.5", "vllm:time_to_first_token_seconds"),
		"ttftP95":          quantile("0.95", "vllm:time_to_first_token_seconds"),
		"saturatedRequest": saturated("vllm:request_success_total", `, finished_reason!="abort"`),
		"saturatedTokens":  saturated("vllm:generation_tokens_total", ""),
	}
}

func (s Source) rateWindow() time.Duration {
	if s.RateWindow <= 0 {
		return 5 * time.Minute
	}
	return s.RateWindow
}

// ErrNoTraffic means Prometheus has no finished request of the model in the window.
var ErrNoTraffic = errors.New("no traffic")

// Measure reads the profile from Prometheus.
func Measure(ctx context.Context, api promv1.API, s Source) (*Profile, error) {
	from, to := wholeHours(s.From, s.To, s.Location)
	if !to.After(from) {
		return nil, fmt.Errorf("profile of %s: the window %s..%s holds no whole hour", s.Model, s.From.Format(time.RFC3339), s.To.Format(time.RFC3339))
	}
	s.From, s.To = from, to
	qs := s.Queries()
	p := &Profile{Model: s.Model, Service: s.Service, From: from.UTC(), To: to.UTC(), TimeZone: s.Location.String()}
	hours := int(to.Sub(from) / time.Hour)
	var err error
	var missing, queueMissing []bool
	if p.Hourly, missing, err = hourly(ctx, api, qs["hourly"], from, hours); err != nil {
		return nil, err
	}
	if p.Queue, queueMissing, err = hourly(ctx, api, qs["queue"], from, hours); err != nil {
		return nil, err
	}
	covered := 0
	for i := range missing {
		if missing[i] || queueMissing[i] {
			p.HoursWithoutData = append(p.HoursWithoutData, i)
		} else {
			covered++
		}
	}
	if sum(p.Hourly) == 0 {
		return nil, fmt.Errorf("profile of %s (Service %s) from %s to %s: %w: no vllm:request_success_total", s.Model, s.Service,
			from.Format(time.RFC3339), to.Format(time.RFC3339), ErrNoTraffic)
	}
	if covered >= MinHours {
		seen := map[[2]int]bool{}
		for i := range missing {
			if !missing[i] && !queueMissing[i] {
				l := from.Add(time.Duration(i) * time.Hour)
				seen[[2]int{int(l.Weekday()), l.Hour()}] = true
			}
		}
		for d := range 7 {
			for h := range 24 {
				if !seen[[2]int{d, h}] {
					return nil, fmt.Errorf("profile of %s (Service %s): no hour of the window on %s at %02d:00 has data; every hour of the week needs one",
						s.Model, s.Service, time.Weekday(d), h)
				}
			}
		}
	}
	if covered < MinHours {
		return nil, fmt.Errorf("profile of %s (Service %s): Prometheus has data for %d of the window's %d hours; a profile needs a whole week (%d hours) at least: is its retention shorter than the window?",
			s.Model, s.Service, covered, hours, MinHours)
	}
	for name, dst := range map[string]*float64{
		"promptP50": &p.Tokens.Prompt.P50, "promptP95": &p.Tokens.Prompt.P95,
		"responseP50": &p.Tokens.Response.P50, "responseP95": &p.Tokens.Response.P95,
		"ttftP50": &p.TTFT.P50, "ttftP95": &p.TTFT.P95,
	} {
		v, ok, err := instant(ctx, api, qs[name], to)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if !ok || v <= 0 {
			return nil, fmt.Errorf("profile of %s: %s: no data in the window (%s); a length or latency of 0 is never written", s.Model, name, qs[name])
		}
		*dst = v
	}
	reqs, err := pointValues(ctx, api, qs["saturatedRequest"], to)
	if err != nil {
		return nil, fmt.Errorf("saturated throughput: %w", err)
	}
	toks, err := pointValues(ctx, api, qs["saturatedTokens"], to)
	if err != nil {
		return nil, fmt.Errorf("saturated throughput: %w", err)
	}
	p.Replica = Replica{RequestsPerSecond: round(median(reqs), 3), TokensPerSecond: round(median(toks), 1), Samples: len(reqs)}
	return p, nil
}

// wholeHours rounds from up and to down to whole hours of loc.
func wholeHours(from, to time.Time, loc *time.Location) (time.Time, time.Time) {
	f, t := from.In(loc), to.In(loc)
	hf := time.Date(f.Year(), f.Month(), f.Day(), f.Hour(), 0, 0, 0, loc)
	if hf.Before(f) {
		hf = hf.Add(time.Hour)
	}
	return hf, time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
}

// MinHours is the least a profile must cover: every hour of the week once.
const MinHours = 7 * 24

// hourly runs query at the end of each of the hours from from. An hour without a value is 0 in
// values and true in missing: no data is not no traffic.
func hourly(ctx context.Context, api promv1.API, query string, from time.Time, hours int) (values []float64, missing []bool, err error) {
	val, _, err := api.QueryRange(ctx, query, promv1.Range{Start: from.Add(time.Hour), End: from.Add(time.Duration(hours) * time.Hour), Step: time.Hour})
	if err != nil {
		return nil, nil, fmt.Errorf("prometheus: %s: %w", query, err)
	}
	values, missing = make([]float64, hours), make([]bool, hours)
	for i := range missing {
		missing[i] = true
	}
	m, ok := val.(model.Matrix)
	if !ok {
		return nil, nil, fmt.Errorf("prometheus: %s: a %s, not a matrix", query, val.Type())
	}
	for _, series := range m {
		for _, v := range series.Values {
			i := int(v.Timestamp.Time().Sub(from)/time.Hour) - 1
			if i >= 0 && i < hours && !math.IsNaN(float64(v.Value)) {
				values[i] += round(float64(v.Value), 4)
				missing[i] = false
			}
		}
	}
	return values, missing, nil
}

// instant runs query at t and returns its one value; ok is false for no value or NaN.
func instant(ctx context.Context, api promv1.API, query string, t time.Time) (v float64, ok bool, err error) {
	val, _, err := api.Query(ctx, query, t)
	if err != nil {
		return 0, false, fmt.Errorf("prometheus: %s: %w", query, err)
	}
	vec, isVec := val.(model.Vector)
	if !isVec {
		return 0, false, fmt.Errorf("prometheus: %s: a %s, not a vector", query, val.Type())
	}
	if len(vec) == 0 || math.IsNaN(float64(vec[0].Value)) {
		return 0, false, nil
	}
	return round(float64(vec[0].Value), 3), true, nil
}

// pointValues runs a subquery at t and returns every point of every series.
func pointValues(ctx context.Context, api promv1.API, query string, t time.Time) ([]float64, error) {
	val, _, err := api.Query(ctx, query, t)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %s: %w", query, err)
	}
	m, ok := val.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("prometheus: %s: a %s, not a matrix", query, val.Type())
	}
	var out []float64
	for _, series := range m {
		for _, v := range series.Values {
			out = append(out, float64(v.Value))
		}
	}
	return out, nil
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func sum(vs []float64) float64 {
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t
}

// round keeps digits decimals, so the file in Git does not carry float noise.
func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
