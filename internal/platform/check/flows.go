package check

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// FlowsFile declares the connections the platform needs (rule flows-allowed).
const FlowsFile = "base/network/flows.yaml"

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
//
// Warnings name each monitor endpoint or route backend that resolves to no pod (its flow is not
// checked), and an env whose pin predates FlowsFile on main (head).
func flowsAllowed(src, head render.Source, env string, objs []*unstructured.Unstructured) (violations, warnings []Violation) {
	data, err := src.ReadFile(FlowsFile)
	if errors.Is(err, fs.ErrNotExist) {
		if head.Has(FlowsFile) {
			warnings = append(warnings, Violation{Rule: "flows-allowed", Object: FlowsFile, Message: fmt.Sprintf(
				"%s runs pin %s, which predates %s: its NetworkPolicies are checked once a promotion moves it", env, gitrepo.Short(src.Revision()), FlowsFile)})
		}
		return nil, warnings
	}
	bad := func(err error) ([]Violation, []Violation) {
		return []Violation{{Rule: "flows-allowed", Object: FlowsFile, Message: err.Error()}}, nil
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
	flows, misses, err := spec.flows(objs)
	if err != nil {
		return bad(err)
	}
	for _, m := range misses {
		warnings = append(warnings, Violation{Rule: "flows-allowed", Object: FlowsFile, Message: m})
	}
	seen := map[string]bool{}
	for _, f := range flows {
		v := np.allows(f.src, f.dst, f.port, f.proto)
		object := fmt.Sprintf("%s → %s", f.src.what, f.dst.what)
		key := object + fmt.Sprint(f.port, f.proto)
		if v.allowed || seen[key] {
			continue
		}
		seen[key] = true
		violations = append(violations, Violation{Rule: "flows-allowed", Object: object,
			Message: fmt.Sprintf("%d/%s (%s) is denied: %s", f.port, f.proto, f.why, v.reason)})
	}
	return violations, warnings
}

// flows lists every flow to check: the declared ones and the derived ones.
func (s *flowsSpec) flows(objs []*unstructured.Unstructured) ([]flow, []string, error) {
	pods := renderedPods(objs)
	resolve := func(name string) ([]netPeer, error) {
		e, ok := s.Endpoints[name]
		if !ok {
			return nil, fmt.Errorf("%s: no endpoint %q (endpoints: %s)", FlowsFile, name, strings.Join(slices.Sorted(maps.Keys(s.Endpoints)), ", "))
		}
		return e.peers(name, pods)
	}
	// The universe of pods selectors choose from: the rendered ones and the endpoints' own.
	universe := append([]netPeer(nil), pods...)
	for _, name := range slices.Sorted(maps.Keys(s.Endpoints)) {
		if e := s.Endpoints[name]; e.IP == "" {
			if ps, err := e.peers(name, pods); err == nil && len(ps) == 1 && ps[0].what == name {
				universe = append(universe, ps[0])
			}
		}
	}
	var out []flow
	var misses []string
	for i, f := range s.Flows {
		if f.Port <= 0 || f.Port > 65535 {
			return nil, nil, fmt.Errorf("%s: flow %d (%s → %s): port %d", FlowsFile, i+1, f.From, f.To, f.Port)
		}
		from, err := resolve(f.From)
		if err != nil {
			return nil, nil, err
		}
		to, err := resolve(f.To)
		if err != nil {
			return nil, nil, err
		}
		proto, why := f.protoAndWhy()
		for _, a := range from {
			for _, b := range to {
				out = append(out, flow{src: a, dst: b, port: f.Port, proto: proto, why: why})
			}
		}
	}
	if s.Derive.DNS != "" {
		dns, err := resolve(s.Derive.DNS)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, dnsFlows(pods, dns)...)
	}
	if s.Derive.Monitors != "" {
		scraper, err := resolve(s.Derive.Monitors)
		if err != nil {
			return nil, nil, err
		}
		targets, m := scrapeTargets(objs, universe)
		misses = append(misses, m...)
		for _, t := range targets {
			for _, p := range scraper {
				out = append(out, flow{src: p, dst: t.pod, port: t.port, proto: corev1.ProtocolTCP, why: t.why})
			}
		}
	}
	if s.Derive.Routes != "" {
		gw, err := resolve(s.Derive.Routes)
		if err != nil {
			return nil, nil, err
		}
		targets, m := routeBackends(objs, universe)
		misses = append(misses, m...)
		for _, t := range targets {
			for _, p := range gw {
				out = append(out, flow{src: p, dst: t.pod, port: t.port, proto: corev1.ProtocolTCP, why: t.why})
			}
		}
		out = append(out, pickerFlows(objs, universe)...)
	}
	return out, misses, nil
}

// protoAndWhy is the flow's protocol, TCP unless it says, and its reason, "from → to" unless
// it says.
func (f flowSpec) protoAndWhy() (corev1.Protocol, string) {
	proto := f.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	why := f.Why
	if why == "" {
		why = f.From + " → " + f.To
	}
	return proto, why
}

// dnsFlows is the flows from each of pods to each DNS server of dns, on port 53 over UDP and TCP.
func dnsFlows(pods, dns []netPeer) []flow {
	var out []flow
	for _, p := range pods {
		for _, d := range dns {
			for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
				out = append(out, flow{src: p, dst: d, port: 53, proto: proto, why: "DNS"})
			}
		}
	}
	return out
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
