package capacity

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestColdStartEstimate(t *testing.T) {
	declaredLoad := DefaultColdStart()
	declaredLoad.LoadBandwidth, declaredLoad.LoadTime = 0, 45*time.Second

	tests := []struct {
		name        string
		c           ColdStart
		stages      []time.Duration
		total       time.Duration
		inContainer time.Duration
	}{
		{
			name:        "documented default: 90 + 80 + 128 + (8 + 30) = 336 s",
			c:           DefaultColdStart(),
			stages:      []time.Duration{90 * time.Second, 80 * time.Second, 128 * time.Second, 38 * time.Second},
			total:       336 * time.Second,
			inContainer: 166 * time.Second,
		},
		{
			name:        "declared load time",
			c:           declaredLoad,
			stages:      []time.Duration{90 * time.Second, 80 * time.Second, 128 * time.Second, 75 * time.Second},
			total:       373 * time.Second,
			inContainer: 203 * time.Second,
		},
		{
			name: "cached image, weights on local NVMe",
			c: ColdStart{NodeProvisioning: 0, ImageBytes: 0, WeightsBytes: 16e9,
				DownloadBandwidth: 3e9, LoadBandwidth: 2e9, EngineInit: 30 * time.Second},
			stages:      []time.Duration{0, 0, 6 * time.Second, 38 * time.Second},
			total:       44 * time.Second,
			inContainer: 44 * time.Second,
		},
		{
			name: "fractions round up to the second",
			c: ColdStart{ImageBytes: 1, PullBandwidth: 1e9, WeightsBytes: 1, DownloadBandwidth: 1e9,
				LoadBandwidth: 1e9},
			stages:      []time.Duration{0, time.Second, time.Second, time.Second},
			total:       3 * time.Second,
			inContainer: 2 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := tt.c.Estimate()
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Stages) != 4 {
				t.Fatalf("%d stages, want 4", len(e.Stages))
			}
			for i, s := range e.Stages {
				if s.Duration != tt.stages[i] {
					t.Errorf("stage %d %s = %s (%s), want %s", i, s.Name, s.Duration, s.Detail, tt.stages[i])
				}
			}
			if e.Total != tt.total || e.InContainer != tt.inContainer {
				t.Errorf("total %s, in container %s; want %s, %s", e.Total, e.InContainer, tt.total, tt.inContainer)
			}
		})
	}
}

// The seed documents say a cold start takes 4–6 minutes; the documented default must land there.
func TestDefaultColdStartInSeedRange(t *testing.T) {
	e, err := DefaultColdStart().Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if e.Total < 4*time.Minute || e.Total > 6*time.Minute {
		t.Errorf("default cold start %s, want within 4–6 min", e.Total)
	}
}

func TestColdStartErrors(t *testing.T) {
	tests := []struct {
		name string
		c    ColdStart
	}{
		{"image without bandwidth", ColdStart{ImageBytes: 1}},
		{"weights without bandwidth", ColdStart{WeightsBytes: 1}},
		{"negative provisioning", ColdStart{NodeProvisioning: -time.Second}},
		{"negative load bandwidth", ColdStart{LoadBandwidth: -1}},
		{"negative image", ColdStart{ImageBytes: -1, PullBandwidth: 1}},
	}
	for _, tt := range tests {
		if _, err := tt.c.Estimate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error = %v, want ErrInvalid", tt.name, err)
		}
	}
}

func TestStartupProbeBudget(t *testing.T) {
	tests := []struct {
		delay, period time.Duration
		threshold     int32
		want          time.Duration
	}{
		{60 * time.Second, 10 * time.Second, 36, 420 * time.Second}, // the platform's probe
		{0, 10 * time.Second, 3, 30 * time.Second},                  // Kubernetes defaults
		{5 * time.Second, time.Second, 0, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := StartupProbeBudget(tt.delay, tt.period, tt.threshold); got != tt.want {
			t.Errorf("StartupProbeBudget(%s, %s, %d) = %s, want %s", tt.delay, tt.period, tt.threshold, got, tt.want)
		}
	}
}

func TestCheckStartupProbe(t *testing.T) {
	def, err := DefaultColdStart().Estimate()
	if err != nil {
		t.Fatal(err)
	}
	// The seed table's worst case: 90 + 90 + 120 + 60 = 360 s, 180 s of it in the container.
	seedWorst := ColdStartEstimate{Total: 360 * time.Second, InContainer: 180 * time.Second}
	tests := []struct {
		name                   string
		budget                 time.Duration
		e                      ColdStartEstimate
		coversTotal, coversCtr bool
		explainHas             string
	}{
		{"seed: 420 s ≥ 360 s", 420 * time.Second, seedWorst, true, true, "60 s to spare"},
		{"default estimate under the platform probe", 420 * time.Second, def, true, true, "covers the whole cold start"},
		{"covers the container, not the total", 200 * time.Second, def, false, true, "what the kubelet measures"},
		{"too short: kubelet kills it", 60 * time.Second, def, false, false, "raise failureThreshold"},
		{"Kubernetes default probe (30 s)", StartupProbeBudget(0, 10*time.Second, 3), def, false, false, "136 s short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := CheckStartupProbe(tt.budget, tt.e)
			if err != nil {
				t.Fatal(err)
			}
			if p.CoversTotal != tt.coversTotal || p.CoversInContainer != tt.coversCtr {
				t.Errorf("covers total %v, in container %v; want %v, %v", p.CoversTotal, p.CoversInContainer, tt.coversTotal, tt.coversCtr)
			}
			if !strings.Contains(p.Explanation, tt.explainHas) {
				t.Errorf("explanation %q does not contain %q", p.Explanation, tt.explainHas)
			}
		})
	}
	if _, err := CheckStartupProbe(0, def); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero budget: error = %v, want ErrInvalid", err)
	}
}
