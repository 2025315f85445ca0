package check

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/render"
)

// FlowsFile declares the connections the platform needs (rule flows-allowed).
const FlowsFile = "policies/flows.yaml"

// flowsSpec is FlowsFile: named endpoints, the flows between them, and the flows derived from
// the render.
type flowsSpec struct {
	// Endpoints are pods by namespace and labels (the rendered workloads whose pod templates
	// match, or, when none does, a pod with exactly these labels: a chart's or an operator's),
	// or an address outside the cluster.
	Endpoints map[string]endpointSpec `json:"endpoints"`
	Flows     []flowSpec              `json:"flows"`
	Derive    struct {
		// Monitors names the endpoint that scrapes every ServiceMonitor's and PodMonitor's
		// target port.
		Monitors string `json:"monitors"`
		// Routes names the endpoint (the Gateway's pods) that reaches every HTTPRoute's backends.
		Routes string `json:"routes"`
		// DNS names the endpoint every rendered pod resolves names with (UDP and TCP 53).
		DNS string `json:"dns"`
	} `json:"derive"`
}

type endpointSpec struct {
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Ports     map[string]int32  `json:"ports,omitempty"` // named TCP ports of a pod not rendered
	IP        string            `json:"ip,omitempty"`
}

type flowSpec struct {
	From     string          `json:"from"`
	To       string          `json:"to"`
	Port     int32           `json:"port"`
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	Why      string          `json:"why,omitempty"`
}

// flow is one connection to check: from a pod (or address) to another on a port.
type flow struct {
	src, dst netPeer
	port     int32
	proto    corev1.Protocol
	why      string
}

// flowsAllowed is rule flows-allowed: every flow FlowsFile declares, every scrape of a
// ServiceMonitor or PodMonitor, every HTTPRoute backend behind the Gateway and every pod's DNS
// is allowed by the env's NetworkPolicies. Each denied flow is named with the policies that
// deny it. A revision without FlowsFile is not checked.
func flowsAllowed(src render.Source, objs []*unstructured.Unstructured) []Violation {
	data, err := src.ReadFile(FlowsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	bad := func(err error) []Violation {
		return []Violation{{Rule: "flows-allowed", Object: FlowsFile, Message: err.Error()}}
	}
	if err != nil {
		return bad(err)
	}
	var spec flowsSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		return bad(fmt.Errorf("%s: %w", FlowsFile, err))
	}
	np, err := newNetPolicies(objs)
	if err != nil {
		return bad(err)
	}
	flows, err := spec.flows(objs)
	if err != nil {
		return bad(err)
	}
	var out []Violation
	seen := map[string]bool{}
	for _, f := range flows {
		v := np.allows(f.src, f.dst, f.port, f.proto)
		object := fmt.Sprintf("%s → %s", f.src.what, f.dst.what)
		key := object + fmt.Sprint(f.port, f.proto)
		if v.allowed || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Violation{Rule: "flows-allowed", Object: object,
			Message: fmt.Sprintf("%d/%s (%s) is denied: %s", f.port, f.proto, f.why, v.reason)})
	}
	return out
}

// flows lists every flow to check: the declared ones and the derived ones.
func (s *flowsSpec) flows(objs []*unstructured.Unstructured) ([]flow, error) {
	pods := renderedPods(objs)
	resolve := func(name string) ([]netPeer, error) {
		e, ok := s.Endpoints[name]
		if !ok {
			return nil, fmt.Errorf("%s: no endpoint %q (endpoints: %s)", FlowsFile, name, strings.Join(sortedKeys(s.Endpoints), ", "))
		}
		return e.peers(name, pods)
	}
	// The universe of pods selectors choose from: the rendered ones and the endpoints' own.
	universe := append([]netPeer(nil), pods...)
	for _, name := range sortedKeys(s.Endpoints) {
		if e := s.Endpoints[name]; e.IP == "" {
			if ps, err := e.peers(name, pods); err == nil && len(ps) == 1 && ps[0].what == name {
				universe = append(universe, ps[0])
			}
		}
	}
	var out []flow
	for i, f := range s.Flows {
		if f.Port <= 0 || f.Port > 65535 {
			return nil, fmt.Errorf("%s: flow %d (%s → %s): port %d", FlowsFile, i+1, f.From, f.To, f.Port)
		}
		from, err := resolve(f.From)
		if err != nil {
			return nil, err
		}
		to, err := resolve(f.To)
		if err != nil {
			return nil, err
		}
		proto := f.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		why := f.Why
		if why == "" {
			why = f.From + " → " + f.To
		}
		for _, a := range from {
			for _, b := range to {
				out = append(out, flow{src: a, dst: b, port: f.Port, proto: proto, why: why})
			}
		}
	}
	if s.Derive.DNS != "" {
		dns, err := resolve(s.Derive.DNS)
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			for _, d := range dns {
				for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
					out = append(out, flow{src: p, dst: d, port: 53, proto: proto, why: "DNS"})
				}
			}
		}
	}
	if s.Derive.Monitors != "" {
		scraper, err := resolve(s.Derive.Monitors)
		if err != nil {
			return nil, err
		}
		for _, t := range scrapeTargets(objs, universe) {
			for _, p := range scraper {
				out = append(out, flow{src: p, dst: t.pod, port: t.port, proto: corev1.ProtocolTCP, why: t.why})
			}
		}
	}
	if s.Derive.Routes != "" {
		gw, err := resolve(s.Derive.Routes)
		if err != nil {
			return nil, err
		}
		for _, t := range routeBackends(objs, universe) {
			for _, p := range gw {
				out = append(out, flow{src: p, dst: t.pod, port: t.port, proto: corev1.ProtocolTCP, why: t.why})
			}
		}
	}
	return out, nil
}

// peers are the pods an endpoint stands for: the rendered ones its labels select in its
// namespace, else one pod of its own with exactly those labels; or its address.
func (e endpointSpec) peers(name string, pods []netPeer) ([]netPeer, error) {
	if e.IP != "" {
		ip, err := netip.ParseAddr(e.IP)
		if err != nil {
			return nil, fmt.Errorf("%s: endpoint %s: %w", FlowsFile, name, err)
		}
		return []netPeer{{what: name + " (" + e.IP + ")", ip: ip}}, nil
	}
	if e.Namespace == "" || len(e.Labels) == 0 {
		return nil, fmt.Errorf("%s: endpoint %s needs a namespace and labels, or an ip", FlowsFile, name)
	}
	sel := &metav1.LabelSelector{MatchLabels: e.Labels}
	var out []netPeer
	for _, p := range pods {
		if p.namespace == e.Namespace && selectorMatches(sel, p.labels) {
			out = append(out, p)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	ports := map[string]namedPort{}
	for n, num := range e.Ports {
		ports[n] = namedPort{number: num, protocol: corev1.ProtocolTCP}
	}
	return []netPeer{{what: name, namespace: e.Namespace, labels: e.Labels, ports: ports}}, nil
}

// renderedPods are the pods the render's workloads make: their templates' labels and ports.
func renderedPods(objs []*unstructured.Unstructured) []netPeer {
	var out []netPeer
	for _, o := range objs {
		tmpl := podTemplateObject(o)
		if tmpl == nil {
			continue
		}
		if host, _, _ := unstructured.NestedBool(tmpl, "spec", "hostNetwork"); host {
			continue // the node's address: NetworkPolicy does not apply to it
		}
		lbls, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "labels")
		p := netPeer{what: fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()), namespace: o.GetNamespace(), labels: lbls, ports: map[string]namedPort{}}
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(tmpl, "spec", field)
			for _, c := range cs {
				cm, _ := c.(map[string]any)
				ports, _, _ := unstructured.NestedSlice(cm, "ports")
				for _, port := range ports {
					pm, _ := port.(map[string]any)
					name, _ := pm["name"].(string)
					num, _, _ := unstructured.NestedInt64(pm, "containerPort")
					proto, _ := pm["protocol"].(string)
					if proto == "" {
						proto = string(corev1.ProtocolTCP)
					}
					if name != "" {
						p.ports[name] = namedPort{number: int32(num), protocol: corev1.Protocol(proto)}
					}
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// podTemplateObject is a workload's pod template (metadata and spec), or a Pod; nil otherwise.
func podTemplateObject(o *unstructured.Unstructured) map[string]any {
	var path []string
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Pod"}:
		return o.Object
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "apps", Kind: "ReplicaSet"},
		schema.GroupKind{Group: "batch", Kind: "Job"}:
		path = []string{"spec", "template"}
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		path = []string{"spec", "jobTemplate", "spec", "template"}
	default:
		return nil
	}
	t, _, _ := unstructured.NestedMap(o.Object, path...)
	return t
}

// target is a pod and the port a flow reaches it on.
type target struct {
	pod  netPeer
	port int32
	why  string
}

// scrapeTargets are the pods and ports the ServiceMonitors and PodMonitors scrape, among pods.
// A monitor whose Service, pods or port the render does not hold is skipped.
func scrapeTargets(objs []*unstructured.Unstructured, pods []netPeer) []target {
	services := objectsOf(objs, "", "Service")
	var out []target
	for _, m := range objs {
		if m.GroupVersionKind().Group != "monitoring.coreos.com" {
			continue
		}
		namespaces := monitorNamespaces(m)
		var sel metav1.LabelSelector
		if s, ok, _ := unstructured.NestedMap(m.Object, "spec", "selector"); ok {
			_ = runtimeFrom(s, &sel)
		}
		why := fmt.Sprintf("scrape of %s %s/%s", m.GetKind(), m.GetNamespace(), m.GetName())
		switch m.GetKind() {
		case "ServiceMonitor":
			eps, _, _ := unstructured.NestedSlice(m.Object, "spec", "endpoints")
			for _, svc := range services {
				if !namespaces(svc.GetNamespace()) || !selectorMatches(&sel, svc.GetLabels()) {
					continue
				}
				for _, ep := range eps {
					epm, _ := ep.(map[string]any)
					portName, _ := epm["port"].(string)
					tp := epm["targetPort"]
					out = append(out, serviceTargets(svc, portName, tp, pods, why)...)
				}
			}
		case "PodMonitor":
			eps, _, _ := unstructured.NestedSlice(m.Object, "spec", "podMetricsEndpoints")
			for _, p := range pods {
				if !namespaces(p.namespace) || !selectorMatches(&sel, p.labels) {
					continue
				}
				for _, ep := range eps {
					epm, _ := ep.(map[string]any)
					if name, _ := epm["port"].(string); name != "" {
						if np, ok := p.ports[name]; ok {
							out = append(out, target{pod: p, port: np.number, why: why})
						}
					} else if n, ok, _ := unstructured.NestedInt64(epm, "portNumber"); ok {
						out = append(out, target{pod: p, port: int32(n), why: why})
					}
				}
			}
		}
	}
	return out
}

// monitorNamespaces is the namespaces a monitor looks in: its namespaceSelector's matchNames,
// any, or its own namespace.
func monitorNamespaces(m *unstructured.Unstructured) func(string) bool {
	if any, _, _ := unstructured.NestedBool(m.Object, "spec", "namespaceSelector", "any"); any {
		return func(string) bool { return true }
	}
	names, ok, _ := unstructured.NestedStringSlice(m.Object, "spec", "namespaceSelector", "matchNames")
	if !ok || len(names) == 0 {
		names = []string{m.GetNamespace()}
	}
	return func(ns string) bool {
		for _, n := range names {
			if n == ns {
				return true
			}
		}
		return false
	}
}

// serviceTargets resolves a Service port (by name, or a target port given directly) to the pods
// behind the Service and the container port each is reached on.
func serviceTargets(svc *unstructured.Unstructured, portName string, targetPort any, pods []netPeer, why string) []target {
	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if len(selector) == 0 {
		return nil // endpoints managed by hand: not known from the render
	}
	var tp any = targetPort
	if tp == nil {
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, p := range ports {
			pm, _ := p.(map[string]any)
			if name, _ := pm["name"].(string); name == portName {
				tp = pm["targetPort"]
				if tp == nil {
					tp = pm["port"]
				}
			}
		}
	}
	var out []target
	for _, p := range pods {
		if p.namespace != svc.GetNamespace() || !selectorMatches(&metav1.LabelSelector{MatchLabels: selector}, p.labels) {
			continue
		}
		switch v := tp.(type) {
		case string:
			if np, ok := p.ports[v]; ok {
				out = append(out, target{pod: p, port: np.number, why: why})
			}
		case int64:
			out = append(out, target{pod: p, port: int32(v), why: why})
		case float64:
			out = append(out, target{pod: p, port: int32(v), why: why})
		}
	}
	return out
}

// routeBackends are the pods and ports the HTTPRoutes and GRPCRoutes send traffic to.
func routeBackends(objs []*unstructured.Unstructured, pods []netPeer) []target {
	services := map[string]*unstructured.Unstructured{}
	for _, s := range objectsOf(objs, "", "Service") {
		services[s.GetNamespace()+"/"+s.GetName()] = s
	}
	var out []target
	for _, r := range objs {
		if r.GroupVersionKind().Group != "gateway.networking.k8s.io" || (r.GetKind() != "HTTPRoute" && r.GetKind() != "GRPCRoute") {
			continue
		}
		why := fmt.Sprintf("%s %s/%s to its backend", r.GetKind(), r.GetNamespace(), r.GetName())
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		for _, rule := range rules {
			rm, _ := rule.(map[string]any)
			refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
			for _, ref := range refs {
				b, _ := ref.(map[string]any)
				if kind, _ := b["kind"].(string); kind != "" && kind != "Service" {
					continue
				}
				name, _ := b["name"].(string)
				ns, _ := b["namespace"].(string)
				if ns == "" {
					ns = r.GetNamespace()
				}
				svc := services[ns+"/"+name]
				port, _, _ := unstructured.NestedInt64(b, "port")
				if svc == nil || port == 0 {
					continue
				}
				ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
				for _, p := range ports {
					pm, _ := p.(map[string]any)
					if n, _, _ := unstructured.NestedInt64(pm, "port"); n == port {
						tp := pm["targetPort"]
						if tp == nil {
							tp = port
						}
						out = append(out, serviceTargets(svc, "", tp, pods, why)...)
					}
				}
			}
		}
	}
	return out
}

func objectsOf(objs []*unstructured.Unstructured, group, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GroupVersionKind().Group == group {
			out = append(out, o)
		}
	}
	return out
}

func runtimeFrom(m map[string]any, into any) error {
	data, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(data, into)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
