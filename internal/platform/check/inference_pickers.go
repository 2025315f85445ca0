package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// More of rule inference-pool: pools that share pods, a target port vLLM does not serve on, an
// objective of no pool, a picker its RBAC does not let start; and the flows from each picker to
// its pool's pods for rule flows-allowed.

// inferenceObjectiveGK is the kind of a request's priority in a pool (v1alpha2, the kind the
// pickers' release reads).
var inferenceObjectiveGK = schema.GroupKind{Group: "inference.networking.x-k8s.io", Kind: "InferenceObjective"}

// vllmDefaultPort is the port vLLM's OpenAI server listens on without --port.
const vllmDefaultPort = "8000"

// inferencePoolOverlaps: two pools of a namespace select the same pods. Each pool's picker then
// sends requests to pods the other's also fills, and neither sees the other's queue: a canary's
// share is not its weight, and a stable pool serves the canary's weights.
func inferencePoolOverlaps(objs []*unstructured.Unstructured) []Violation {
	pools := objects(objs, inferencePoolGK)
	sort.Slice(pools, func(i, j int) bool { return id(pools[i]) < id(pools[j]) })
	var out []Violation
	for i, a := range pools {
		for _, b := range pools[i+1:] {
			if a.GetNamespace() != b.GetNamespace() {
				continue
			}
			var shared []string
			for _, w := range poolWorkloads(a, objs, false) {
				if slices.Contains(poolWorkloads(b, objs, false), w) {
					shared = append(shared, id(w))
				}
			}
			if len(shared) > 0 {
				out = append(out, Violation{Rule: "inference-pool", Object: id(a), Message: fmt.Sprintf(
					"and %s select the same pods (%s): each picker fills pods the other also sends to, and a split between the pools is not what its weights say",
					id(b), strings.Join(shared, ", "))})
			}
		}
	}
	return out
}

// inferencePoolPorts: a pool's target port is the one its vLLM containers serve on (--port, 8000
// without it). Another port reaches nothing: every request of the pool fails, and the picker
// reads no metrics.
func inferencePoolPorts(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, p := range objects(objs, inferencePoolGK) {
		ports, _, _ := unstructured.NestedSlice(p.Object, "spec", "targetPorts")
		var targets []string
		for _, tp := range ports {
			n, _, _ := unstructured.NestedInt64(asMap(tp), "number")
			targets = append(targets, fmt.Sprint(n))
		}
		for _, w := range poolWorkloads(p, objs, true) {
			cs, _, _ := unstructured.NestedSlice(podTemplate(w), "containers")
			for _, c := range cs {
				cm := asMap(c)
				if !isVLLMContainer(cm) {
					continue
				}
				port := vllmDefaultPort
				if v, ok := flags(cm["args"])["--port"]; ok {
					port = v
				}
				if !slices.Contains(targets, port) {
					out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: fmt.Sprintf(
						"targets port %s, but container %s of %s serves on %s (--port): every request of the pool fails",
						strings.Join(targets, ", "), cm["name"], id(w), port)})
				}
			}
		}
	}
	return out
}

// isVLLMContainer says whether a container runs vLLM's OpenAI server: named vllm, or its image is.
func isVLLMContainer(c map[string]any) bool {
	name, _ := c["name"].(string)
	image, _ := c["image"].(string)
	return name == "vllm" || strings.Contains(image, "vllm-openai")
}

// inferenceObjectivePools: an InferenceObjective names a pool the env renders in its namespace,
// in the pool's group, at a priority no higher than the interactive 0. Otherwise no picker reads
// it, and the requests that name it run at priority 0; or its clients outrank rag-api. A pool
// with objectives has an interactive one (0) and a batch one (below 0). A pool with none (the
// canary) gets no batch request: the route sends those to the stable pool.
func inferenceObjectivePools(objs []*unstructured.Unstructured) []Violation {
	pools := map[string]bool{}
	for _, p := range objects(objs, inferencePoolGK) {
		pools[p.GetNamespace()+"/"+p.GetName()] = true
	}
	var out []Violation
	for _, o := range objects(objs, inferenceObjectiveGK) {
		name, _, _ := unstructured.NestedString(o.Object, "spec", "poolRef", "name")
		group, ok, _ := unstructured.NestedString(o.Object, "spec", "poolRef", "group")
		switch {
		case ok && group != inferencePoolGK.Group:
			out = append(out, Violation{Rule: "inference-pool", Object: id(o), Message: fmt.Sprintf(
				"names its pool in group %q, not %s: no picker reads it, and the requests naming it run at priority 0", group, inferencePoolGK.Group)})
		case !pools[o.GetNamespace()+"/"+name]:
			out = append(out, Violation{Rule: "inference-pool", Object: id(o), Message: fmt.Sprintf(
				"names InferencePool %s/%s, which the env does not render: no picker reads it, and the requests naming it run at priority 0",
				o.GetNamespace(), name)})
		}
		if p := priority(o); p > 0 {
			out = append(out, Violation{Rule: "inference-pool", Object: id(o), Message: fmt.Sprintf(
				"has priority %d, above the interactive 0: any client naming it outranks every request without an objective (rag-api)", p)})
		}
	}
	for _, p := range objects(objs, inferencePoolGK) {
		own := poolObjectives(p, objs)
		if len(own) == 0 {
			continue
		}
		if !slices.ContainsFunc(own, func(o *unstructured.Unstructured) bool { return priority(o) == 0 }) {
			out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: "has objectives but no interactive one (priority 0): add <pool>-interactive as base/vllm/objectives.yaml does"})
		}
		if !slices.ContainsFunc(own, func(o *unstructured.Unstructured) bool { return priority(o) < 0 }) {
			out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: "has objectives but no batch one (priority below 0): batch requests run at priority 0, beside interactive ones"})
		}
	}
	return out
}

// pickerGrant is one right an endpoint picker needs in its namespace.
type pickerGrant struct{ group, resource string }

// inferencePickerRBAC: each pool's picker runs as a ServiceAccount that may get, list and watch
// pods, InferencePools, InferenceObjectives and InferenceModelRewrites in its namespace, as the
// upstream chart grants. The v1.5.0 picker watches the last two whenever their CRDs are served;
// it starts its watches at once, and one refused, it does not start and the pool fails.
func inferencePickerRBAC(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, p := range objects(objs, inferencePoolGK) {
		need := []pickerGrant{{"", "pods"}, {inferencePoolGK.Group, "inferencepools"},
			{inferenceObjectiveGK.Group, "inferenceobjectives"}, {inferenceObjectiveGK.Group, "inferencemodelrewrites"}}
		for _, d := range pickerDeployments(p, objs) {
			sa, _, _ := unstructured.NestedString(podTemplate(d), "serviceAccountName")
			if sa == "" {
				sa = "default"
			}
			rules := serviceAccountRules(objs, d.GetNamespace(), sa)
			for _, g := range need {
				if missing := missingVerbs(rules, g, []string{"get", "list", "watch"}); len(missing) > 0 {
					res := g.resource
					if g.group != "" {
						res += "." + g.group
					}
					out = append(out, Violation{Rule: "inference-pool", Object: id(p), Message: fmt.Sprintf(
						"its endpoint picker %s runs as ServiceAccount %s, which may not %s %s in %s: the picker does not start",
						id(d), sa, strings.Join(missing, ", "), res, d.GetNamespace())})
				}
			}
		}
	}
	return out
}

// pickerDeployments are the rendered Deployments behind a pool's endpoint picker Service.
func pickerDeployments(pool *unstructured.Unstructured, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	name, _, _ := unstructured.NestedString(pool.Object, "spec", "endpointPickerRef", "name")
	var out []*unstructured.Unstructured
	for _, svc := range objects(objs, schema.GroupKind{Kind: "Service"}) {
		if svc.GetNamespace() != pool.GetNamespace() || svc.GetName() != name {
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		for _, d := range objects(objs, schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
			podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
			if d.GetNamespace() == svc.GetNamespace() && len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) {
				out = append(out, d)
			}
		}
	}
	return out
}

// serviceAccountRules are the rules the rendered RoleBindings of ns give ServiceAccount sa there,
// from Roles of ns and ClusterRoles.
func serviceAccountRules(objs []*unstructured.Unstructured, ns, sa string) []map[string]any {
	roles := map[string]*unstructured.Unstructured{}
	for _, r := range objs {
		switch r.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}:
			roles["Role/"+r.GetNamespace()+"/"+r.GetName()] = r
		case schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:
			roles["ClusterRole//"+r.GetName()] = r
		}
	}
	var out []map[string]any
	for _, b := range objects(objs, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}) {
		if b.GetNamespace() != ns || !bindsServiceAccount(b, ns, sa) {
			continue
		}
		kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		key := "ClusterRole//" + name
		if kind == "Role" {
			key = "Role/" + ns + "/" + name
		}
		if r := roles[key]; r != nil {
			rs, _, _ := unstructured.NestedSlice(r.Object, "rules")
			for _, rule := range rs {
				out = append(out, asMap(rule))
			}
		}
	}
	return out
}

// bindsServiceAccount says whether binding b (in ns) has ServiceAccount sa of ns as a subject.
func bindsServiceAccount(b *unstructured.Unstructured, ns, sa string) bool {
	subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	for _, s := range subjects {
		m := asMap(s)
		sns, _ := m["namespace"].(string)
		if sns == "" {
			sns = ns
		}
		if m["kind"] == "ServiceAccount" && m["name"] == sa && sns == ns {
			return true
		}
	}
	return false
}

// missingVerbs are the verbs of want that no rule grants on g.
func missingVerbs(rules []map[string]any, g pickerGrant, want []string) []string {
	var missing []string
	for _, verb := range want {
		granted := slices.ContainsFunc(rules, func(r map[string]any) bool {
			groups, _, _ := unstructured.NestedStringSlice(r, "apiGroups")
			resources, _, _ := unstructured.NestedStringSlice(r, "resources")
			verbs, _, _ := unstructured.NestedStringSlice(r, "verbs")
			return anyOf(groups, g.group) && anyOf(resources, g.resource) && anyOf(verbs, verb)
		})
		if !granted {
			missing = append(missing, verb)
		}
	}
	return missing
}

// anyOf says whether list holds v or the wildcard.
func anyOf(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, "*")
}

// pickerFlows are the flows from each pool's endpoint picker pods to the pool's pods on its target
// ports: the picker reads each pod's /metrics there (queue depth, KV-cache use). Denied, it
// scores blind.
func pickerFlows(objs []*unstructured.Unstructured, pods []netPeer) []flow {
	var out []flow
	for _, p := range objects(objs, inferencePoolGK) {
		sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "selector", "matchLabels")
		ports, _, _ := unstructured.NestedSlice(p.Object, "spec", "targetPorts")
		if len(sel) == 0 {
			continue
		}
		var pickers []netPeer
		for _, d := range pickerDeployments(p, objs) {
			for _, peer := range pods {
				if peer.what == fmt.Sprintf("%s %s/%s", d.GetKind(), d.GetNamespace(), d.GetName()) {
					pickers = append(pickers, peer)
				}
			}
		}
		why := "the endpoint picker of " + id(p) + " reads its pods' metrics"
		for _, dst := range pods {
			if dst.namespace != p.GetNamespace() || !labels.SelectorFromSet(sel).Matches(labels.Set(dst.labels)) {
				continue
			}
			for _, tp := range ports {
				n, _, _ := unstructured.NestedInt64(asMap(tp), "number")
				for _, src := range pickers {
					out = append(out, flow{src: src, dst: dst, port: int32(n), proto: corev1.ProtocolTCP, why: why})
				}
			}
		}
	}
	return out
}
