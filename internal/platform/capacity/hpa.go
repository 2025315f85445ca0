package capacity

import (
	"fmt"
	"math"
	"time"
)

const (
	// DefaultTolerance is the HorizontalPodAutoscaler's default tolerance
	// (kube-controller-manager --horizontal-pod-autoscaler-tolerance): a metric within 10 % of
	// its target changes nothing.
	DefaultTolerance = 0.1
	// DefaultScaleDownStabilization is the default spec.behavior.scaleDown.stabilizationWindowSeconds:
	// a scale-down goes no lower than the highest recommendation of the last 300 s.
	DefaultScaleDownStabilization = 300 * time.Second
	// DefaultScaleUpStabilization is the default spec.behavior.scaleUp.stabilizationWindowSeconds:
	// none, scale-ups act on the latest recommendation.
	DefaultScaleUpStabilization = time.Duration(0)
)

// HPA holds the autoscaler settings that shape a scaling decision. The zero value is not
// useful; start from DefaultHPA.
type HPA struct {
	// MinReplicas is spec.minReplicas (Kubernetes' default is 1).
	MinReplicas int32
	// MaxReplicas is spec.maxReplicas; 0 means no upper bound.
	MaxReplicas int32
	// Tolerance is the relative distance from the target within which nothing changes.
	Tolerance float64
	// ScaleDownWindow is the scale-down stabilisation window.
	ScaleDownWindow time.Duration
	// ScaleUpWindow is the scale-up stabilisation window.
	ScaleUpWindow time.Duration
}

// DefaultHPA returns Kubernetes' defaults: min 1, no max, 10 % tolerance, 300 s scale-down
// and no scale-up stabilisation.
func DefaultHPA() HPA {
	return HPA{
		MinReplicas:     1,
		Tolerance:       DefaultTolerance,
		ScaleDownWindow: DefaultScaleDownStabilization,
		ScaleUpWindow:   DefaultScaleUpStabilization,
	}
}

// Recommendation is an earlier replica recommendation of the controller, Age ago. The
// controller remembers them to stabilise its decisions.
type Recommendation struct {
	// Age is how long ago the recommendation was made.
	Age time.Duration
	// Replicas is what was recommended.
	Replicas int32
}

// HPADecision is the outcome of HPA.Desired, with each step of the computation.
type HPADecision struct {
	// Current is the replica count the decision started from.
	Current int32 `json:"current"`
	// Metric and Target are the per-pod metric and its per-pod target (AverageValue).
	Metric float64 `json:"metric"`
	Target float64 `json:"target"`
	// Ratio is Metric / Target.
	Ratio float64 `json:"ratio"`
	// WithinTolerance is true when |Ratio − 1| ≤ Tolerance, so Raw = Current.
	WithinTolerance bool `json:"withinTolerance"`
	// Raw is ceil(Current × Ratio), or Current within tolerance — this cycle's recommendation.
	Raw int32 `json:"raw"`
	// Stabilized is Raw after the stabilisation windows.
	Stabilized int32 `json:"stabilized"`
	// Desired is Stabilized clamped to [MinReplicas, MaxReplicas]: the replica count the HPA
	// writes.
	Desired int32 `json:"desired"`
	// FirstStep is how far the default scale-up policy (the larger of +100 % and +4 pods per
	// 15 s) lets the first scale-up go; equal to Desired when not scaling up.
	FirstStep int32 `json:"firstStep"`
	// Steps explains each stage in words.
	Steps []string `json:"steps"`
}

// Desired computes the replica count the HorizontalPodAutoscaler sets for one metric of type
// AverageValue (KEDA's Prometheus triggers): desired = ceil(current × metric / target), no
// change while |metric/target − 1| ≤ Tolerance (computed as the controller does, so exactly
// 10 % off is within), then stabilised — a scale-down goes no lower
// than the highest recommendation made within ScaleDownWindow (history plus this one), a
// scale-up no higher than the lowest within ScaleUpWindow — then clamped to
// [MinReplicas, MaxReplicas]. With 4 pods, 30 requests waiting per pod and a target of 10 the
// HPA wants 12. History is the controller's earlier recommendations; nil means none.
func (h HPA) Desired(current int32, metric, target float64, history []Recommendation) (HPADecision, error) {
	d := HPADecision{Current: current, Metric: metric, Target: target}
	switch {
	case current <= 0:
		return d, fmt.Errorf("hpa: current replicas %d: the HPA is idle at 0 (KEDA activates from zero), want ≥ 1: %w", current, ErrInvalid)
	case !(target > 0) || math.IsInf(target, 0):
		return d, fmt.Errorf("hpa: target %g must be positive and finite: %w", target, ErrInvalid)
	case !(metric >= 0) || math.IsInf(metric, 0):
		return d, fmt.Errorf("hpa: metric %g must be non-negative and finite: %w", metric, ErrInvalid)
	case h.MinReplicas < 0 || h.MaxReplicas < 0 || (h.MaxReplicas > 0 && h.MinReplicas > h.MaxReplicas):
		return d, fmt.Errorf("hpa: min %d / max %d replicas: want 0 ≤ min ≤ max: %w", h.MinReplicas, h.MaxReplicas, ErrInvalid)
	case !(h.Tolerance >= 0) || h.ScaleDownWindow < 0 || h.ScaleUpWindow < 0:
		return d, fmt.Errorf("hpa: tolerance %g and windows %s/%s must not be negative: %w", h.Tolerance, h.ScaleUpWindow, h.ScaleDownWindow, ErrInvalid)
	}

	// As the controller does it (replica_calculator.go): within tolerance when
	// 1 − tolerance ≤ ratio ≤ 1 + tolerance, so 11 against 10 is still "no change".
	d.Ratio = metric / target
	if 1-h.Tolerance <= d.Ratio && d.Ratio <= 1+h.Tolerance {
		d.WithinTolerance = true
		d.Raw = current
		d.Steps = append(d.Steps, fmt.Sprintf("ratio %g / %g = %.3f is within the %g %% tolerance of 1: no change, %d replicas",
			metric, target, d.Ratio, h.Tolerance*100, current))
	} else {
		raw := math.Ceil(float64(current) * metric / target)
		if raw > math.MaxInt32 {
			raw = math.MaxInt32
		}
		d.Raw = int32(raw)
		d.Steps = append(d.Steps, fmt.Sprintf("ceil(%d × %g / %g) = ceil(%g) = %d (ratio %.3f is outside the %g %% tolerance)",
			current, metric, target, float64(current)*metric/target, d.Raw, d.Ratio, h.Tolerance*100))
	}

	h.stabilize(&d, current, history)

	d.Desired = d.Stabilized
	if d.Desired < h.MinReplicas {
		d.Desired = h.MinReplicas
		d.Steps = append(d.Steps, fmt.Sprintf("clamped up to minReplicas %d", h.MinReplicas))
	}
	if h.MaxReplicas > 0 && d.Desired > h.MaxReplicas {
		d.Desired = h.MaxReplicas
		d.Steps = append(d.Steps, fmt.Sprintf("clamped down to maxReplicas %d", h.MaxReplicas))
	}

	d.FirstStep = d.Desired
	if d.Desired > current {
		limit := max(2*int64(current), int64(current)+4)
		if int64(d.Desired) > limit {
			d.FirstStep = int32(limit)
			d.Steps = append(d.Steps, fmt.Sprintf("the default scale-up policy (+100 %% or +4 pods per 15 s, whichever is more) "+
				"gets there in steps: %d first", d.FirstStep))
		}
	}
	d.Steps = append(d.Steps, fmt.Sprintf("desired replicas: %d", d.Desired))
	return d, nil
}

// stabilize sets d.Stabilized from d.Raw and the recommendations of history within the
// scale-up and scale-down windows, and adds the step saying why.
func (h HPA) stabilize(d *HPADecision, current int32, history []Recommendation) {
	// Stabilisation, as the controller's stabilizeRecommendationWithBehaviors does it.
	up, down := d.Raw, d.Raw
	for _, r := range history {
		if r.Age < h.ScaleUpWindow && r.Replicas < up {
			up = r.Replicas
		}
		if r.Age < h.ScaleDownWindow && r.Replicas > down {
			down = r.Replicas
		}
	}
	d.Stabilized = current
	if d.Stabilized < up {
		d.Stabilized = up
	}
	if d.Stabilized > down {
		d.Stabilized = down
	}
	switch {
	case d.Raw < current && d.Stabilized > d.Raw:
		d.Steps = append(d.Steps, fmt.Sprintf("scale-down stabilisation (%s window): the highest recommendation within the window is %d, so %d, not %d",
			secs(h.ScaleDownWindow), down, d.Stabilized, d.Raw))
	case d.Raw < current:
		d.Steps = append(d.Steps, fmt.Sprintf("scale-down stabilisation (%s window): no higher recommendation within the window, %d stands; "+
			"a later cycle can only go lower once the window has passed",
			secs(h.ScaleDownWindow), d.Raw))
	case d.Raw > current && d.Stabilized < d.Raw:
		d.Steps = append(d.Steps, fmt.Sprintf("scale-up stabilisation (%s window): the lowest recommendation within the window is %d, so %d, not %d",
			secs(h.ScaleUpWindow), up, d.Stabilized, d.Raw))
	case d.Raw > current && h.ScaleUpWindow == 0:
		d.Steps = append(d.Steps, fmt.Sprintf("scale-up: no stabilisation window, %d stands (a scale-down would wait out the %s window)",
			d.Raw, secs(h.ScaleDownWindow)))
	case d.Raw > current:
		d.Steps = append(d.Steps, fmt.Sprintf("scale-up stabilisation (%s window): no lower recommendation within the window, %d stands",
			secs(h.ScaleUpWindow), d.Raw))
	default:
		d.Steps = append(d.Steps, fmt.Sprintf("stabilisation: nothing to stabilise (scale-up window %s, scale-down window %s)",
			secs(h.ScaleUpWindow), secs(h.ScaleDownWindow)))
	}
}
