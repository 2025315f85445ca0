package check

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// drainPossible checks that a node drain can always proceed: every PodDisruptionBudget lets at
// least one of its pods be evicted when its workloads run at their minimum scale. A budget that
// allows none there (minAvailable 1 over one replica, maxUnavailable 0) makes kubectl drain,
// Karpenter's expiry and consolidation and cluster upgrades wait forever on the node. The minimum
// scale of a Deployment or StatefulSet is the minReplicas of an HPA or the minReplicaCount of a
// KEDA ScaledObject that targets it, else its spec.replicas (default 1); a budget's workloads are
// those of its namespace whose pod template its selector selects. Percentages round up, as the
// disruption controller rounds them (k8s.io/apimachinery intstr, roundUp true, for minAvailable
// and maxUnavailable alike). A budget over no rendered workload, or over workloads scaled to
// zero, has nothing to drain and passes.
func drainPossible(objs []*unstructured.Unstructured) []Violation {
	mins := minimumScales(objs)
	var out []Violation
	for _, pdb := range objs {
		if pdb.GetKind() != "PodDisruptionBudget" {
			continue
		}
		var names []string
		var expected int64
		for _, w := range budgetWorkloads(pdb, objs) {
			n := workloadMinimum(w, mins)
			if _, autoscaled := mins[objKey(w)]; autoscaled {
				// Scaled to zero, it still runs one replica while there is work, and a drain
				// then must get through.
				n = max(n, 1)
			}
			expected += n
			names = append(names, fmt.Sprintf("%s (%d)", id(w), n))
		}
		if expected == 0 {
			continue
		}
		allowed, how := disruptionsAllowed(pdb, expected)
		if allowed >= 1 {
			continue
		}
		out = append(out, Violation{Rule: "drain-possible", Object: id(pdb), Message: fmt.Sprintf(
			"%s allows no eviction at the minimum scale of %s: %s; kubectl drain, Karpenter's expiry and consolidation and cluster upgrades wait forever on its node; use maxUnavailable: 1",
			id(pdb), strings.Join(names, ", "), how)})
	}
	return sortViolations(out)
}

// minimumScales returns the least replicas an autoscaler keeps of each workload it targets, by
// objKey of the workload: an HPA's minReplicas (default 1), a ScaledObject's minReplicaCount
// (KEDA's default 0); the lower when both target one.
func minimumScales(objs []*unstructured.Unstructured) map[string]int64 {
	out := map[string]int64{}
	for _, o := range objs {
		var m int64
		switch gk := o.GroupVersionKind().GroupKind(); {
		case gk.Group == "keda.sh" && gk.Kind == "ScaledObject":
			m, _, _ = unstructured.NestedInt64(o.Object, "spec", "minReplicaCount")
		case gk.Group == "autoscaling" && gk.Kind == "HorizontalPodAutoscaler":
			var found bool
			if m, found, _ = unstructured.NestedInt64(o.Object, "spec", "minReplicas"); !found {
				m = 1
			}
		default:
			continue
		}
		for _, r := range scaleTargetRef(o) {
			if prev, ok := out[r.key()]; !ok || m < prev {
				out[r.key()] = m
			}
		}
	}
	return out
}

// workloadMinimum is the least replicas a workload runs: its autoscaler's minimum, else its
// spec.replicas (default 1).
func workloadMinimum(w *unstructured.Unstructured, mins map[string]int64) int64 {
	if m, ok := mins[objKey(w)]; ok {
		return m
	}
	if r, found, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); found {
		return r
	}
	return 1
}

// budgetWorkloads returns the Deployments, StatefulSets and ReplicaSets of the budget's namespace
// whose pods it selects (DaemonSet pods are not evicted by a drain; Jobs are not scaled).
func budgetWorkloads(pdb *unstructured.Unstructured, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, w := range objs {
		switch w.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
			schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		default:
			continue
		}
		if w.GetNamespace() != pdb.GetNamespace() {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "template", "metadata", "labels")
		if selects(pdb, podLabels) {
			out = append(out, w)
		}
	}
	return out
}

// disruptionsAllowed is how many of expected healthy pods a budget lets go at once, as the
// disruption controller computes status.disruptionsAllowed with every expected pod healthy, and
// how (for messages).
func disruptionsAllowed(pdb *unstructured.Unstructured, expected int64) (int64, string) {
	if v, ok, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); ok {
		n := scaledValue(v, expected)
		return min(max(n, 0), expected), fmt.Sprintf("maxUnavailable %v allows %d of %d", v, min(max(n, 0), expected), expected)
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "minAvailable"); ok {
		n := scaledValue(v, expected)
		allowed := max(expected-n, 0)
		return allowed, fmt.Sprintf("minAvailable %v keeps %d of %d, allows %d", v, min(n, expected), expected, allowed)
	}
	return 0, "neither minAvailable nor maxUnavailable is set"
}

// scaledValue resolves an int-or-percent budget value against a pod count, rounding a percentage
// up as the disruption controller does. An unparsable value counts as 0.
func scaledValue(v any, replicas int64) int64 {
	var iv intstr.IntOrString
	switch x := v.(type) {
	case int64:
		iv = intstr.FromInt32(int32(x))
	case float64:
		iv = intstr.FromInt32(int32(x))
	case string:
		iv = intstr.Parse(x)
	default:
		return 0
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&iv, int(replicas), true)
	if err != nil {
		return 0
	}
	return int64(n)
}
