package capacity

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHPADesired(t *testing.T) {
	def := DefaultHPA()
	withMinMax := func(min, max int32) HPA { h := DefaultHPA(); h.MinReplicas, h.MaxReplicas = min, max; return h }
	upWindow := DefaultHPA()
	upWindow.ScaleUpWindow = 60 * time.Second

	tests := []struct {
		name            string
		h               HPA
		current         int32
		metric, target  float64
		history         []Recommendation
		raw, stab, want int32
		firstStep       int32
		withinTol       bool
		explainHas      string
	}{
		{name: "seed: 4 pods, 30 waiting, target 10 → 12", h: def, current: 4, metric: 30, target: 10,
			raw: 12, stab: 12, want: 12, firstStep: 8, explainHas: "ceil(4 × 30 / 10)"},
		{name: "within tolerance above", h: def, current: 4, metric: 11, target: 10,
			raw: 4, stab: 4, want: 4, firstStep: 4, withinTol: true, explainHas: "10 % tolerance"},
		{name: "within tolerance below", h: def, current: 4, metric: 9, target: 10,
			raw: 4, stab: 4, want: 4, firstStep: 4, withinTol: true},
		{name: "just outside tolerance", h: def, current: 4, metric: 11.1, target: 10,
			raw: 5, stab: 5, want: 5, firstStep: 5},
		{name: "scale down without history", h: def, current: 12, metric: 2, target: 10,
			raw: 3, stab: 3, want: 3, firstStep: 3, explainHas: "300 s window"},
		{name: "scale down held by a recommendation 2 min ago", h: def, current: 12, metric: 2, target: 10,
			history: []Recommendation{{Age: 2 * time.Minute, Replicas: 8}, {Age: 4 * time.Minute, Replicas: 6}},
			raw:     3, stab: 8, want: 8, firstStep: 8, explainHas: "highest recommendation within the window is 8"},
		{name: "recommendations older than 300 s do not count", h: def, current: 12, metric: 2, target: 10,
			history: []Recommendation{{Age: 5 * time.Minute, Replicas: 12}, {Age: 10 * time.Minute, Replicas: 11}},
			raw:     3, stab: 3, want: 3, firstStep: 3},
		{name: "scale down never goes above current", h: def, current: 6, metric: 2, target: 10,
			history: []Recommendation{{Age: time.Minute, Replicas: 20}},
			raw:     2, stab: 6, want: 6, firstStep: 6},
		{name: "scale up ignores history by default", h: def, current: 4, metric: 30, target: 10,
			history: []Recommendation{{Age: 10 * time.Second, Replicas: 4}},
			raw:     12, stab: 12, want: 12, firstStep: 8, explainHas: "no stabilisation window"},
		{name: "scale up with a window takes the lowest", h: upWindow, current: 4, metric: 30, target: 10,
			history: []Recommendation{{Age: 30 * time.Second, Replicas: 6}},
			raw:     12, stab: 6, want: 6, firstStep: 6, explainHas: "lowest recommendation within the window is 6"},
		{name: "clamped to max", h: withMinMax(1, 10), current: 4, metric: 30, target: 10,
			raw: 12, stab: 12, want: 10, firstStep: 8, explainHas: "maxReplicas 10"},
		{name: "clamped to min", h: withMinMax(2, 10), current: 4, metric: 1, target: 10,
			raw: 1, stab: 1, want: 2, firstStep: 2, explainHas: "minReplicas 2"},
		{name: "idle metric scales to min", h: def, current: 3, metric: 0, target: 10,
			raw: 0, stab: 0, want: 1, firstStep: 1},
		{name: "big jump is rate limited", h: def, current: 1, metric: 100, target: 10,
			raw: 10, stab: 10, want: 10, firstStep: 5, explainHas: "5 first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.h.Desired(tt.current, tt.metric, tt.target, tt.history)
			if err != nil {
				t.Fatal(err)
			}
			if got.Raw != tt.raw || got.Stabilized != tt.stab || got.Desired != tt.want ||
				got.FirstStep != tt.firstStep || got.WithinTolerance != tt.withinTol {
				t.Errorf("Desired = raw %d, stabilised %d, desired %d, first step %d, within tolerance %v; "+
					"want %d, %d, %d, %d, %v\n%s", got.Raw, got.Stabilized, got.Desired, got.FirstStep, got.WithinTolerance,
					tt.raw, tt.stab, tt.want, tt.firstStep, tt.withinTol, strings.Join(got.Steps, "\n"))
			}
			if all := strings.Join(got.Steps, "\n"); !strings.Contains(all, tt.explainHas) {
				t.Errorf("steps do not contain %q:\n%s", tt.explainHas, all)
			}
		})
	}
}

func TestHPADesiredErrors(t *testing.T) {
	bad := DefaultHPA()
	bad.MinReplicas, bad.MaxReplicas = 5, 2
	neg := DefaultHPA()
	neg.Tolerance = -0.1
	tests := []struct {
		name           string
		h              HPA
		current        int32
		metric, target float64
	}{
		{"zero current", DefaultHPA(), 0, 30, 10},
		{"zero target", DefaultHPA(), 4, 30, 0},
		{"negative metric", DefaultHPA(), 4, -1, 10},
		{"min above max", bad, 4, 30, 10},
		{"negative tolerance", neg, 4, 30, 10},
	}
	for _, tt := range tests {
		if _, err := tt.h.Desired(tt.current, tt.metric, tt.target, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error = %v, want ErrInvalid", tt.name, err)
		}
	}
}
