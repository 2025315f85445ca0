// Package profile measures a model's traffic profile from Prometheus (vLLM's own series) and turns
// it into settings: the KEDA queue threshold, the minimum replicas of each hour of the week, and
// the peaks the schedule is missing, each with its arithmetic. A profile lives in Git beside the
// env's schedule, at clusters/<env>/profiles/<model>.yaml.
package profile

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Path is where an env keeps the profile of model.
func Path(env, model string) string { return path.Join("clusters", env, "profiles", model+".yaml") }

// Profile is what a model's traffic was over a window.
type Profile struct {
	// Model is vLLM's model_name; Service the Service label that scopes the series to one
	// Deployment (as the KEDA triggers do).
	Model   string `json:"model"`
	Service string `json:"service"`
	// From and To bound the window; hours are counted in TimeZone.
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	TimeZone string    `json:"timeZone"`
	// Tokens are the prompt and response lengths of finished requests.
	Tokens Tokens `json:"tokens"`
	// TTFT is the time to first token, seconds.
	TTFT Quantiles `json:"ttftSeconds"`
	// Replica is one replica's throughput where it saturated (a queue waited on it).
	Replica Replica `json:"replica"`
	// Plan are the targets the profile's settings are proposed for (zero: the defaults), so
	// that `auditor check` proposes what `auditor profile` did.
	Plan Plan `json:"plan"`
	// Hourly is the arrival rate (finished requests of every reason a second) of each hour from
	// From; Queue the mean number of waiting requests over all replicas in the same hours.
	Hourly []float64 `json:"hourlyRequestsPerSecond,omitempty"`
	Queue  []float64 `json:"hourlyQueueDepth,omitempty"`
	// HoursWithoutData are the hours (indexes of Hourly) Prometheus had no data for: left out
	// of the week's pattern and of the peaks, not taken as hours without traffic.
	HoursWithoutData []int `json:"hoursWithoutData,omitempty"`
}

// Plan are the targets of the proposals: a replica's planned share of its saturated throughput,
// and the longest wait for a first token in the queue, in seconds.
type Plan struct {
	Utilization float64 `json:"utilization,omitempty"`
	TTFTSeconds float64 `json:"ttftSeconds,omitempty"`
}

// Targets are the plan's targets, the defaults where it has none.
func (p *Profile) Targets() Targets {
	return Targets{Utilization: p.Plan.Utilization, TTFT: time.Duration(p.Plan.TTFTSeconds * float64(time.Second))}.withDefaults()
}

// Tokens are p50 and p95 lengths in tokens.
type Tokens struct {
	Prompt   Quantiles `json:"prompt"`
	Response Quantiles `json:"response"`
}

// Quantiles are a p50 and a p95.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

// Replica is one replica's measured throughput at saturation: the median, over every pod and
// every rate window in which the pod had requests waiting throughout, of what it finished
// (aborts aside).
type Replica struct {
	RequestsPerSecond float64 `json:"saturatedRequestsPerSecond"`
	TokensPerSecond   float64 `json:"saturatedGeneratedTokensPerSecond"`
	// Samples is how many pod-samples were saturated; zero means no replica saturated.
	Samples int `json:"saturatedSamples"`
	// Stated is true when no replica saturated and RequestsPerSecond was stated instead
	// (`auditor profile --replica-throughput`), e.g. from a load test.
	Stated bool `json:"stated,omitempty"`
}

// Location is the profile's time zone.
func (p *Profile) Location() (*time.Location, error) {
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: time zone %q: %w", p.Model, p.TimeZone, err)
	}
	return loc, nil
}

// Marshal is the profile as the YAML kept in Git: the hourly series one day to a line, each
// line headed by a comment with its day.
func (p *Profile) Marshal() ([]byte, error) {
	loc, err := p.Location()
	if err != nil {
		return nil, err
	}
	rest := *p
	rest.Hourly, rest.Queue = nil, nil
	data, err := yaml.Marshal(rest)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: %w", p.Model, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Traffic profile of %s (Service %s), measured by `auditor profile` from Prometheus.\n"+
		"# The hourly series start at `from`, 24 hours of %s to a line. Read by `auditor check`\n"+
		"# (the p95 lengths size --max-num-seqs).\n", p.Model, p.Service, p.TimeZone)
	b.Write(data)
	for _, series := range []struct {
		key string
		vs  []float64
	}{{"hourlyRequestsPerSecond", p.Hourly}, {"hourlyQueueDepth", p.Queue}} {
		fmt.Fprintf(&b, "%s: [\n", series.key)
		for day := 0; day*24 < len(series.vs); day++ {
			vs := series.vs[day*24 : min(len(series.vs), day*24+24)]
			parts := make([]string, len(vs))
			for i, v := range vs {
				parts[i] = strconv.FormatFloat(v, 'f', -1, 64)
			}
			sep := ","
			if (day+1)*24 >= len(series.vs) {
				sep = ""
			}
			fmt.Fprintf(&b, "  # %s\n  %s%s\n", p.From.In(loc).AddDate(0, 0, day).Format("Mon 2006-01-02"), strings.Join(parts, ", "), sep)
		}
		b.WriteString("]\n")
	}
	return []byte(b.String()), nil
}

// Parse reads a profile file; file names it in errors.
func Parse(file string, data []byte) (*Profile, error) {
	p := &Profile{}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if p.Model == "" || len(p.Hourly) == 0 {
		return nil, fmt.Errorf("%s: not a profile (needs model and hourlyRequestsPerSecond)", file)
	}
	if _, err := p.Location(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// validate rejects a profile whose parts disagree, or whose values no measurement gives.
func (p *Profile) validate() error {
	n := len(p.Hourly)
	switch {
	case len(p.Queue) != 0 && len(p.Queue) != n:
		return fmt.Errorf("hourlyQueueDepth has %d hours, hourlyRequestsPerSecond %d", len(p.Queue), n)
	case !p.To.Equal(p.From.Add(time.Duration(n) * time.Hour)):
		return fmt.Errorf("from %s to %s is not the %d hours of hourlyRequestsPerSecond", p.From.Format(time.RFC3339), p.To.Format(time.RFC3339), n)
	case p.Plan.Utilization < 0 || p.Plan.Utilization > 1:
		return fmt.Errorf("plan.utilization %g: want a share in (0, 1]", p.Plan.Utilization)
	case p.Plan.TTFTSeconds < 0:
		return fmt.Errorf("plan.ttftSeconds %g: want a positive time", p.Plan.TTFTSeconds)
	case p.Replica.RequestsPerSecond < 0 || p.Replica.TokensPerSecond < 0:
		return fmt.Errorf("replica: a negative throughput")
	case p.Replica.Stated && p.Replica.Samples > 0:
		return fmt.Errorf("replica: stated and measured at once (saturatedSamples %d)", p.Replica.Samples)
	}
	for i, v := range p.Hourly {
		if v < 0 || i < len(p.Queue) && p.Queue[i] < 0 {
			return fmt.Errorf("hour %d: a negative rate or queue", i)
		}
	}
	for _, i := range p.HoursWithoutData {
		if i < 0 || i >= n {
			return fmt.Errorf("hoursWithoutData: hour %d is outside the %d hours", i, n)
		}
	}
	return nil
}
