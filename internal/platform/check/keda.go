package check

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// hpaTolerance is kube-controller-manager's default --horizontal-pod-autoscaler-tolerance: the HPA
// leaves the replica count alone while the usage ratio is within 10% of 1.
const hpaTolerance = 0.1

// ratioMetrics are metrics whose every series is a fraction in [0,1] (vLLM's "_perc" gauges are
// fractions, not percentages). Besides these, a metric named "..._ratio" is taken for a fraction,
// as Prometheus' naming conventions ask.
var ratioMetrics = map[string]bool{
	"vllm:kv_cache_usage_perc":  true,
	"vllm:gpu_cache_usage_perc": true, // vLLM before v0.10
	"vllm:cpu_cache_usage_perc": true,
}

// classifiable is the one query shape judged: an optional sum/avg/max/min (without by/without,
// which would return several series, an error for KEDA) over a single metric selector.
var classifiable = regexp.MustCompile(`^\s*(?:(sum|avg|max|min)\s*\(\s*)?([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^{}]*\})?\s*(\))?\s*$`)

// queryRange is what the check can infer of a query's value when every pod is fully loaded.
type queryRange struct {
	// perPod: the value grows with the number of pods reporting (a sum of per-pod fractions:
	// at most one per pod); otherwise the value is at most max whatever the pod count.
	perPod bool
	max    float64
	why    string
}

// classify returns the range of a Prometheus query's value at full load, ok false when the check
// cannot tell (any other shape, a metric that is not a known fraction): such a trigger gets no
// verdict. Classified:
//   - avg/max/min(fraction{...}) or a bare fraction{...} (one series): at most 1;
//   - sum(fraction{...}): at most 1 per pod reporting, i.e. the current replica count.
//
// Counts (vllm:num_requests_waiting) are unbounded: they never cap the scale, nothing to judge.
func classify(query string) (queryRange, bool) {
	m := classifiable.FindStringSubmatch(query)
	if m == nil || (m[1] == "") != (m[4] == "") {
		return queryRange{}, false
	}
	agg, metric := m[1], m[2]
	if !ratioMetrics[metric] && !strings.HasSuffix(metric, "_ratio") {
		return queryRange{}, false
	}
	switch agg {
	case "sum":
		return queryRange{perPod: true, max: 1, why: fmt.Sprintf("sum(%s) of per-pod fractions is at most 1 per pod reporting", metric)}, true
	case "":
		return queryRange{max: 1, why: metric + " is a fraction, at most 1"}, true
	default:
		return queryRange{max: 1, why: fmt.Sprintf("%s(%s) of a fraction is at most 1", agg, metric)}, true
	}
}

// kedaReach checks that every ScaledObject has a fallback (see checkFallback) and that each of its
// Prometheus triggers can drive the target to maxReplicaCount: with every pod fully loaded, the
// replica count the HPA computes from that trigger alone must keep growing until the maximum. The HPA's arithmetic for an external metric:
//   - metricType AverageValue (KEDA's default): desired = ceil(value / threshold), the query's
//     value taken for the total over all pods (no change while value / (threshold × current) is
//     within the tolerance);
//   - metricType Value: desired = ceil(current × value / threshold) (same tolerance on
//     value / threshold).
//
// A trigger whose query the check cannot classify (see classify) gets no verdict, nor does a
// ScaledObject with scalingModifiers (the HPA then sees their formula, not the triggers).
func kedaReach(objs []*unstructured.Unstructured) (violations []Violation) {
	for _, o := range objs {
		if o.GetKind() != "ScaledObject" || o.GroupVersionKind().Group != "keda.sh" {
			continue
		}
		maxR, ok, _ := unstructured.NestedInt64(o.Object, "spec", "maxReplicaCount")
		if !ok {
			maxR = 100 // KEDA's default
		}
		minR, _, _ := unstructured.NestedInt64(o.Object, "spec", "minReplicaCount")
		if v := checkFallback(o); v != "" {
			violations = append(violations, Violation{Rule: "keda-fallback", Object: id(o), Message: v})
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "advanced", "scalingModifiers", "formula"); ok {
			continue
		}
		triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
		for i, t := range triggers {
			if v, ok := triggerReach(asMap(t), i, max(minR, 1), maxR); !ok {
				violations = append(violations, Violation{Rule: "capacity-keda-reach", Object: id(o), Message: v})
			}
		}
	}
	return violations
}

// checkFallback wants a spec.fallback: without one, a Prometheus outage leaves the HPA with no
// metric and the scale wherever it was. Its replicas are not judged: the HPA clamps them to
// [minReplicaCount, maxReplicaCount] anyway, and a scheduled raise of the minimum must not fail.
func checkFallback(o *unstructured.Unstructured) string {
	if _, ok, _ := unstructured.NestedMap(o.Object, "spec", "fallback"); !ok {
		return "no spec.fallback: when Prometheus cannot be queried KEDA keeps no floor (add failureThreshold and replicas)"
	}
	return ""
}

// triggerReach simulates the HPA from start replicas at full load; false and why when the trigger
// stalls below maxR. Triggers it cannot judge pass.
func triggerReach(t map[string]any, index int, start, maxR int64) (string, bool) {
	typ, _, _ := unstructured.NestedString(t, "type")
	query, _, _ := unstructured.NestedString(t, "metadata", "query")
	if typ != "prometheus" || query == "" {
		return "", true
	}
	rng, ok := classify(query)
	if !ok {
		return "", true
	}
	raw, _, _ := unstructured.NestedFieldNoCopy(t, "metadata", "threshold")
	threshold, err := strconv.ParseFloat(fmt.Sprint(raw), 64)
	if err != nil || threshold <= 0 {
		return "", true // KEDA rejects the trigger itself
	}
	metricType, _, _ := unstructured.NestedString(t, "metricType")
	if metricType == "" {
		metricType = "AverageValue"
	}
	if metricType != "AverageValue" && metricType != "Value" {
		return "", true
	}
	name, _, _ := unstructured.NestedString(t, "name")
	if name == "" {
		name = fmt.Sprintf("#%d", index)
	}
	n := start
	for n < maxR {
		value := rng.max
		if rng.perPod {
			value *= float64(n)
		}
		next := desired(metricType, value, threshold, n)
		if next <= n {
			how := fmt.Sprintf("%s = %d", formula(metricType, value, threshold, n), next)
			if next == n && rawDesired(metricType, value, threshold, n) > n {
				how = fmt.Sprintf("%s, within the HPA's %g%% tolerance of %d", formula(metricType, value, threshold, n), hpaTolerance*100, n)
			}
			return fmt.Sprintf("trigger %s (%s, threshold %g, metricType %s) can never reach maxReplicaCount %d: %s, so with every pod full at %d replicas the HPA computes %s; scaling stops at %d",
				name, query, threshold, metricType, maxR, rng.why, n, how, n), false
		}
		n = next
	}
	return "", true
}

// desired is the HPA's replica count for an external metric of value at current replicas.
func desired(metricType string, value, threshold float64, current int64) int64 {
	var ratio float64
	switch metricType {
	case "Value":
		ratio = value / threshold
	default: // AverageValue
		ratio = value / (threshold * float64(current))
	}
	if math.Abs(ratio-1) <= hpaTolerance {
		return current
	}
	return rawDesired(metricType, value, threshold, current)
}

// rawDesired is the HPA's formula without the tolerance.
func rawDesired(metricType string, value, threshold float64, current int64) int64 {
	if metricType == "Value" {
		return int64(math.Ceil(float64(current) * value / threshold))
	}
	return int64(math.Ceil(value / threshold))
}

func formula(metricType string, value, threshold float64, current int64) string {
	if metricType == "Value" {
		return fmt.Sprintf("ceil(%d × %g / %g)", current, value, threshold)
	}
	return fmt.Sprintf("ceil(%g / %g)", value, threshold)
}
