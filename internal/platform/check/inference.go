package check

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The Gateway API Inference Extension's rules: routes send to InferencePools, each pool selects
// model-server pods and names the endpoint picker the Gateway asks which of them takes a request.
// Whether the Gateway reaches the picker under the NetworkPolicies is rule flows-allowed
// (routeBackends derives that flow).

// inferencePoolGK is the kind of a pool (inference.networking.k8s.io/v1).
var inferencePoolGK = schema.GroupKind{Group: "inference.networking.k8s.io", Kind: "InferencePool"}

// routeBackendRef is one backendRef of one rule of a route.
type routeBackendRef struct {
	route           *unstructured.Unstructured
	rule            int // index in spec.rules
	group, kind, ns string
	name            string
	weight          int64
	port            int64
}

// isPool says whether the ref names an InferencePool.
func (b routeBackendRef) isPool() bool {
	return b.group == inferencePoolGK.Group && b.kind == inferencePoolGK.Kind
}

// backendRefsOf are the backendRefs of every HTTPRoute and GRPCRoute of objs, with the Gateway API's
// defaults: kind Service in the core group, the route's namespace, weight 1.
func backendRefsOf(objs []*unstructured.Unstructured) []routeBackendRef {
	var out []routeBackendRef
	for _, r := range objs {
		if !slices.Contains(routeKinds, r.GroupVersionKind().GroupKind()) {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		for i, rule := range rules {
			refs, _, _ := unstructured.NestedSlice(asMap(rule), "backendRefs")
			for _, ref := range refs {
				m := asMap(ref)
				b := routeBackendRef{route: r, rule: i, kind: "Service", ns: r.GetNamespace(), weight: 1}
				if g, ok := m["group"].(string); ok {
					b.group = g
				}
				if k, ok := m["kind"].(string); ok && k != "" {
					b.kind = k
				}
				if ns, ok := m["namespace"].(string); ok && ns != "" {
					b.ns = ns
				}
				b.name, _ = m["name"].(string)
				if w, ok, _ := unstructured.NestedInt64(m, "weight"); ok {
					b.weight = w
				}
				b.port, _, _ = unstructured.NestedInt64(m, "port")
				out = append(out, b)
			}
		}
	}
	return out
}

// inferenceRoutes is rule inference-route: a route sends only to an InferencePool the env renders
// in the route's own namespace, in the pool's API group (the Gateway API defaults a backendRef's
// group to the core group). A pool elsewhere needs a ReferenceGrant and another team's
// picker; a missing one answers every request with an error.
func inferenceRoutes(objs []*unstructured.Unstructured) []Violation {
	pools := map[string]bool{}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == inferencePoolGK {
			pools[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	var out []Violation
	for _, b := range backendRefsOf(objs) {
		if b.kind != inferencePoolGK.Kind {
			continue
		}
		switch {
		case b.ns != b.route.GetNamespace():
			out = append(out, Violation{Rule: "inference-route", Object: id(b.route), Message: fmt.Sprintf(
				"sends to InferencePool %s/%s in another namespace: keep the pool, its picker and the route in %s", b.ns, b.name, b.route.GetNamespace())})
		case b.kind == inferencePoolGK.Kind && b.group != inferencePoolGK.Group:
			out = append(out, Violation{Rule: "inference-route", Object: id(b.route), Message: fmt.Sprintf(
				"sends to kind InferencePool %s in group %q, not %s: the Gateway finds no such backend and answers its requests with an error", b.name, b.group, inferencePoolGK.Group)})
		case !pools[b.ns+"/"+b.name]:
			out = append(out, Violation{Rule: "inference-route", Object: id(b.route), Message: fmt.Sprintf(
				"sends to InferencePool %s/%s, which the env does not render: the Gateway answers its requests with an error", b.ns, b.name)})
		}
	}
	return out
}

// inferenceCanaryWeights is rule inference-canary-weights: a route rule that splits between
// several InferencePools (a canary) gives weights summing to 100, so each weight reads as the
// share of traffic the ledger and the docs say it is.
func inferenceCanaryWeights(objs []*unstructured.Unstructured) []Violation {
	type key struct {
		route *unstructured.Unstructured
		rule  int
	}
	var order []key
	split := map[key][]routeBackendRef{}
	for _, b := range backendRefsOf(objs) {
		k := key{b.route, b.rule}
		if _, seen := split[k]; !seen {
			order = append(order, k)
		}
		split[k] = append(split[k], b)
	}
	var out []Violation
	for _, k := range order {
		refs := split[k]
		if !slices.ContainsFunc(refs, routeBackendRef.isPool) {
			continue
		}
		if len(refs) == 1 {
			if refs[0].weight == 0 {
				out = append(out, Violation{Rule: "inference-canary-weights", Object: id(k.route), Message: fmt.Sprintf(
					"rule %d sends to %s %s alone with weight 0: the Gateway sends it nothing, and every request of the rule fails", k.rule+1, refs[0].kind, refs[0].name)})
			}
			continue
		}
		var sum int64
		var parts []string
		for _, b := range refs {
			sum += b.weight
			parts = append(parts, fmt.Sprintf("%s %s %d", b.kind, b.name, b.weight))
		}
		if sum != 100 {
			out = append(out, Violation{Rule: "inference-canary-weights", Object: id(k.route), Message: fmt.Sprintf(
				"rule %d splits between pools with weights summing to %d (%s), not 100: the canary's share is not what its weight says", k.rule+1, sum, strings.Join(parts, ", "))})
		}
	}
	return out
}

// inferencePools is rule inference-pool: every InferencePool selects the pods of a rendered vLLM
// workload (label platform.llm/component: vllm) in its namespace, and names an endpoint picker
// Service the env renders. A pool that selects nothing has no pod to send to; one without its
// picker's Service fails every request (failureMode FailClose) or spreads them blind.
func inferencePools(objs []*unstructured.Unstructured) []Violation {
	services := map[string]bool{}
	for _, o := range objects(objs, schema.GroupKind{Kind: "Service"}) {
		services[o.GetNamespace()+"/"+o.GetName()] = true
	}
	var out []Violation
	for _, p := range objects(objs, inferencePoolGK) {
		sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 || len(poolWorkloads(p, objs, true)) == 0 {
			out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: fmt.Sprintf(
				"selects no vLLM pod (selector %s): no rendered workload in %s with label platform.llm/component=vllm has pods with these labels",
				labels.SelectorFromSet(sel), p.GetNamespace())})
		}
		kind, _, _ := unstructured.NestedString(p.Object, "spec", "endpointPickerRef", "kind")
		name, _, _ := unstructured.NestedString(p.Object, "spec", "endpointPickerRef", "name")
		switch {
		case name == "":
			out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: "names no endpoint picker (spec.endpointPickerRef): the Gateway cannot route by queue or KV cache"})
		case (kind == "" || kind == "Service") && !services[p.GetNamespace()+"/"+name]:
			out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: fmt.Sprintf(
				"its endpoint picker Service %s/%s is not rendered", p.GetNamespace(), name)})
		case kind == "" || kind == "Service":
			out = append(out, pickerProblems(p, name, objs)...)
		}
		if model := p.GetLabels()["platform.llm/model"]; model != "" {
			for _, w := range poolWorkloads(p, objs, true) {
				podLabels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "template", "metadata", "labels")
				if got := podLabels["platform.llm/model"]; got != model {
					out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: fmt.Sprintf(
						"is the pool of model %s but selects the pods of %s, whose model is %q: its requests reach a server that does not serve %s",
						model, id(w), got, model)})
				}
			}
		}
	}
	return out
}

// pickerProblems checks the endpoint picker Service name of pool: the port the pool names is one
// of the Service's, the Service selects a rendered picker Deployment, and that picker serves
// this pool (--pool-name and --pool-namespace). Any of them wrong, each request of the pool gets
// a 503 (failureMode FailClose) or is picked among another pool's pods.
func pickerProblems(pool *unstructured.Unstructured, name string, objs []*unstructured.Unstructured) []Violation {
	var svc *unstructured.Unstructured
	for _, o := range objects(objs, schema.GroupKind{Kind: "Service"}) {
		if o.GetNamespace() == pool.GetNamespace() && o.GetName() == name {
			svc = o
		}
	}
	if svc == nil {
		return nil
	}
	var out []Violation
	port, _, _ := unstructured.NestedInt64(pool.Object, "spec", "endpointPickerRef", "port", "number")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if port != 0 && !slices.ContainsFunc(ports, func(p any) bool { n, _, _ := unstructured.NestedInt64(asMap(p), "port"); return n == port }) {
		out = append(out, Violation{Rule: "inference-pool", Object: id(pool), Message: fmt.Sprintf(
			"names port %d of its endpoint picker %s, which has no such port: every request of the pool fails", port, id(svc))})
	}
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	var pickers []*unstructured.Unstructured
	for _, d := range objects(objs, schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
		podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		if d.GetNamespace() == svc.GetNamespace() && len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) {
			pickers = append(pickers, d)
		}
	}
	if len(pickers) == 0 {
		return append(out, Violation{Rule: "inference-pool", Object: id(pool), Message: fmt.Sprintf(
			"its endpoint picker %s selects no rendered Deployment (selector %s): no picker answers the Gateway", id(svc), labels.SelectorFromSet(sel))})
	}
	for _, d := range pickers {
		pod := podTemplate(d)
		cs, _, _ := unstructured.NestedSlice(pod, "containers")
		for _, c := range cs {
			if !isPickerContainer(asMap(c)) {
				continue
			}
			for _, msg := range pickerContainerProblems(pool, svc, d, asMap(c), objs) {
				out = append(out, Violation{Rule: "inference-pool", Object: id(pool), Message: msg})
			}
		}
	}
	return out
}

// poolWorkloads are the rendered Deployments and StatefulSets in pool's namespace whose pods it
// selects; vllmOnly keeps those labelled platform.llm/component: vllm.
func poolWorkloads(pool *unstructured.Unstructured, objs []*unstructured.Unstructured, vllmOnly bool) []*unstructured.Unstructured {
	sel, _, _ := unstructured.NestedStringMap(pool.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, w := range objs {
		gk := w.GroupVersionKind().GroupKind()
		if gk != (schema.GroupKind{Group: "apps", Kind: "Deployment"}) && gk != (schema.GroupKind{Group: "apps", Kind: "StatefulSet"}) || w.GetNamespace() != pool.GetNamespace() {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "template", "metadata", "labels")
		if !labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) {
			continue
		}
		if vllmOnly && podLabels["platform.llm/component"] != "vllm" {
			continue
		}
		out = append(out, w)
	}
	return out
}

// objects are the objects of objs of kind gk.
func objects(objs []*unstructured.Unstructured, gk schema.GroupKind) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == gk {
			out = append(out, o)
		}
	}
	return out
}
