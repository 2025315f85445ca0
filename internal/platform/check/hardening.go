package check

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/platform/cost"
)

// The topology keys a replicated workload spreads over: zones first, then nodes.
const (
	zoneKey = "topology.kubernetes.io/zone"
	hostKey = "kubernetes.io/hostname"
)

// replicasSpread checks that every CPU workload that runs two replicas or more (its replicas, or
// its autoscaler's minimum) spreads them over zones and nodes: topologySpreadConstraints on
// topology.kubernetes.io/zone and kubernetes.io/hostname, or a pod anti-affinity on the node.
// Without either, the scheduler and a consolidating autoscaler (Karpenter) may put every replica
// on one node, and losing that node is an outage. GPU workloads are the GPU pool's business
// (gpu-disruption-budget): a GPU node holds what its cards allow.
func replicasSpread(objs []*unstructured.Unstructured) []Violation {
	mins := minimumScales(objs)
	var out []Violation
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		default:
			continue
		}
		pod := podTemplate(o)
		if pod == nil || cost.GPUs(pod) > 0 {
			continue
		}
		n := workloadMinimum(o, mins)
		if n < 2 {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		var missing, other []string
		for _, key := range []string{zoneKey, hostKey} {
			switch spreads, elsewhere := spreadsOver(pod, labels.Set(podLabels), key); {
			case spreads:
			case elsewhere:
				missing, other = append(missing, key), append(other, key)
			default:
				missing = append(missing, key)
			}
		}
		if len(missing) == 0 {
			continue
		}
		why := ""
		if len(other) > 0 {
			why = fmt.Sprintf(" (the labelSelector of its constraint on %s does not match its pods' labels: it spreads other pods)", strings.Join(other, " and "))
		}
		out = append(out, Violation{Rule: "replicas-spread", Object: id(o), Message: fmt.Sprintf(
			"%s runs %d replicas with nothing spreading them over %s%s: one node lost can take them all; add topologySpreadConstraints (maxSkew: 1, whenUnsatisfiable: ScheduleAnyway) on %s whose labelSelector matches the pod template's labels",
			id(o), n, strings.Join(missing, " and "), why, strings.Join(missing, " and "))})
	}
	return out
}

// spreadsOver reports whether a pod spec with podLabels spreads its replicas over key: a topology
// spread constraint on it, or (for nodes) a pod anti-affinity on it, whose labelSelector selects
// the pods themselves (the scheduler counts only the pods it selects; none without one).
// elsewhere is true when there is such a constraint but its selector misses the pods.
func spreadsOver(pod map[string]any, podLabels labels.Set, key string) (spreads, elsewhere bool) {
	var terms []map[string]any
	constraints, _, _ := unstructured.NestedSlice(pod, "topologySpreadConstraints")
	for _, c := range constraints {
		terms = append(terms, asMap(c))
	}
	if key == hostKey {
		required, _, _ := unstructured.NestedSlice(pod, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
		preferred, _, _ := unstructured.NestedSlice(pod, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
		for _, t := range required {
			terms = append(terms, asMap(t))
		}
		for _, t := range preferred {
			term, _, _ := unstructured.NestedMap(asMap(t), "podAffinityTerm")
			terms = append(terms, term)
		}
	}
	for _, t := range terms {
		if t["topologyKey"] != key {
			continue
		}
		if selectorSelects(t["labelSelector"], podLabels) {
			return true, false
		}
		elsewhere = true
	}
	return false, elsewhere
}

// selectorSelects reports whether a labelSelector (matchLabels, matchExpressions) selects podLabels; a
// missing or malformed one selects nothing, as the scheduler reads it.
func selectorSelects(selector any, podLabels labels.Set) bool {
	m, ok := selector.(map[string]any)
	if !ok {
		return false
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls); err != nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	return err == nil && sel.Matches(podLabels)
}

// jobsSyncAgain checks that every Job Argo CD syncs as a plain resource (not a hook) can be synced
// again after a change: a Job's pod template is immutable, so a changed image or argument at the
// same name fails every sync until someone deletes the Job by hand. The sync options Force=true
// and Replace=true make Argo CD delete and recreate it; a hook (argocd.argoproj.io/hook) is
// recreated by its delete policy.
func jobsSyncAgain(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "batch", Kind: "Job"}) {
			continue
		}
		if isHook(o) || o.GetName() == "" {
			continue // a hook is recreated by its delete policy; a generateName Job is new at every sync
		}
		if opts := syncOptions(o); opts["Force"] == "true" && opts["Replace"] == "true" {
			continue
		}
		out = append(out, Violation{Rule: "job-sync-again", Object: id(o), Message: fmt.Sprintf(
			"%s is synced as a plain resource, and a Job's pod template cannot change: its next change of image or arguments fails every sync of the Application; annotate it %s: Force=true,Replace=true (Argo CD then deletes and recreates it)",
			id(o), syncOptionsAnnotation)})
	}
	return out
}

// isHook says whether Argo CD runs o as a hook rather than syncing it: its own hook annotation,
// or Helm's, which Argo CD maps to its hooks.
func isHook(o *unstructured.Unstructured) bool {
	a := o.GetAnnotations()
	_, argo := a[hookAnnotation]
	_, helm := a["helm.sh/hook"]
	return argo || helm
}

// routeKinds are the Gateway API routes whose backendRefs send traffic to Services.
var routeKinds = []schema.GroupKind{
	{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}, {Group: "gateway.networking.k8s.io", Kind: "GRPCRoute"},
}

// routesAfterBackends checks that a route is in a later sync wave than the workloads behind its
// backends (the Deployments and StatefulSets whose pods its Services select). Argo CD applies a
// wave only once the one before is healthy: a route in the same wave as a new backend sends
// traffic to it from the start, through its whole cold start (minutes for a model), where a later
// wave sends it once the backend is available.
func routesAfterBackends(objs []*unstructured.Unstructured) []Violation {
	services := map[string]*unstructured.Unstructured{}
	var workloads []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Kind: "Service"}:
			services[o.GetNamespace()+"/"+o.GetName()] = o
		case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
			workloads = append(workloads, o)
		}
	}
	var out []Violation
	for _, r := range objs {
		if !slices.Contains(routeKinds, r.GroupVersionKind().GroupKind()) {
			continue
		}
		if isHook(r) {
			continue
		}
		rw, err := syncWave(r)
		if err != nil {
			continue // reported by sync-wave-order
		}
		for _, w := range append(backendWorkloads(r, services, workloads), poolBackendWorkloads(r, objs)...) {
			ww, err := syncWave(w)
			if err != nil || ww < rw {
				continue
			}
			out = append(out, Violation{Rule: "route-after-backend", Object: id(r), Message: fmt.Sprintf(
				"%s (sync wave %d) sends traffic to %s (sync wave %d): Argo CD applies them together, so a new backend takes requests through its whole cold start; put the route in wave %d",
				id(r), rw, id(w), ww, ww+1)})
		}
	}
	return out
}

// backendWorkloads are the workloads whose pods the Services of a route's backendRefs select.
func backendWorkloads(route *unstructured.Unstructured, services map[string]*unstructured.Unstructured, workloads []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	for _, rule := range rules {
		refs, _, _ := unstructured.NestedSlice(asMap(rule), "backendRefs")
		for _, ref := range refs {
			m := asMap(ref)
			if g, _ := m["group"].(string); g != "" {
				continue // not a Service
			}
			if k, _ := m["kind"].(string); k != "" && k != "Service" {
				continue
			}
			ns, _ := m["namespace"].(string)
			if ns == "" {
				ns = route.GetNamespace()
			}
			name, _ := m["name"].(string)
			svc := services[ns+"/"+name]
			if svc == nil {
				continue
			}
			sel, found, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
			if !found || len(sel) == 0 {
				continue
			}
			for _, w := range workloads {
				podLabels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "template", "metadata", "labels")
				if w.GetNamespace() == ns && labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) && !slices.Contains(out, w) {
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// poolBackendWorkloads are the workloads whose pods the InferencePools of a route's backendRefs
// select: a pool's pods take the route's traffic as a Service's do.
func poolBackendWorkloads(route *unstructured.Unstructured, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, b := range backendRefsOf([]*unstructured.Unstructured{route}) {
		if !b.isPool() {
			continue
		}
		for _, p := range objects(objs, inferencePoolGK) {
			if p.GetNamespace() != b.ns || p.GetName() != b.name {
				continue
			}
			for _, w := range poolWorkloads(p, objs, false) {
				if !slices.Contains(out, w) {
					out = append(out, w)
				}
			}
		}
	}
	return out
}
