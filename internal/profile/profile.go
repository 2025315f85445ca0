// Package profile measures a model's traffic profile from Prometheus (vLLM's own series) and turns
// it into settings: the KEDA queue threshold, the minimum replicas of each hour of the week, and
// the peaks the schedule is missing, each with its arithmetic. A profile lives in Git beside the
// env's schedule, at clusters/<env>/profiles/<model>.yaml.
package profile

import (
	"fmt"
	"path"
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
	// Hourly is the arrival rate (finished requests of every reason a second) of each hour from
	// From; Queue the mean number of waiting requests over all replicas in the same hours.
	Hourly []float64 `json:"hourlyRequestsPerSecond"`
	Queue  []float64 `json:"hourlyQueueDepth"`
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
// every sample where the pod had requests waiting, of what it finished (aborts aside).
type Replica struct {
	RequestsPerSecond float64 `json:"saturatedRequestsPerSecond"`
	TokensPerSecond   float64 `json:"saturatedGeneratedTokensPerSecond"`
	// Samples is how many pod-samples were saturated; zero means the throughput is unknown.
	Samples int `json:"saturatedSamples"`
}

// Location is the profile's time zone.
func (p *Profile) Location() (*time.Location, error) {
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: time zone %q: %w", p.Model, p.TimeZone, err)
	}
	return loc, nil
}

// Marshal is the profile as the YAML kept in Git.
func (p *Profile) Marshal() ([]byte, error) {
	data, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: %w", p.Model, err)
	}
	head := fmt.Sprintf("# Traffic profile of %s (Service %s), measured by `auditor profile` from Prometheus.\n"+
		"# The hourly series start at `from`, in hours of %s. Read by `auditor check` (the p95 lengths size\n"+
		"# --max-num-seqs) and by `auditor profile --check`.\n", p.Model, p.Service, p.TimeZone)
	return append([]byte(head), data...), nil
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
	return p, nil
}
