package check

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/llm-gitops/platform/internal/engine/manifest"
)

// The flows rule flows-allowed derives from the render: the pods its workloads make, the
// targets its monitors scrape, the backends its routes send to.

// renderedPods are the pods the render's workloads make: their templates' labels and ports.
func renderedPods(objs []*unstructured.Unstructured) []netPeer {
	var out []netPeer
	for _, o := range objs {
		tmpl := manifest.PodTemplate(o)
		if tmpl == nil {
			continue
		}
		host, _, _ := unstructured.NestedBool(tmpl, "spec", "hostNetwork")
		lbls, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "labels")
		p := netPeer{what: fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()), namespace: o.GetNamespace(), labels: lbls, ports: map[string]namedPort{}, host: host}
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

// target is a pod and the port a flow reaches it on.
type target struct {
	pod  netPeer
	port int32
	why  string
}

// scrapeTargets are the pods and ports the ServiceMonitors and PodMonitors scrape, among pods;
// misses name each monitor endpoint that resolves to no pod and port (its scrape goes unchecked).
func scrapeTargets(objs []*unstructured.Unstructured, pods []netPeer) (out []target, misses []string) {
	services := objectsOf(objs, "", "Service")
	for _, m := range objs {
		if m.GroupVersionKind().Group != "monitoring.coreos.com" || (m.GetKind() != "ServiceMonitor" && m.GetKind() != "PodMonitor") {
			continue
		}
		namespaces := monitorNamespaces(m)
		var sel metav1.LabelSelector
		if s, ok, _ := unstructured.NestedMap(m.Object, "spec", "selector"); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s, &sel); err != nil {
				continue // a selector the API server would reject: an empty one would select everything
			}
		}
		monitor := fmt.Sprintf("%s %s/%s", m.GetKind(), m.GetNamespace(), m.GetName())
		why := "scrape of " + monitor
		field := "endpoints"
		if m.GetKind() == "PodMonitor" {
			field = "podMetricsEndpoints"
		}
		eps, _, _ := unstructured.NestedSlice(m.Object, "spec", field)
		for _, ep := range eps {
			epm, _ := ep.(map[string]any)
			before := len(out)
			if m.GetKind() == "ServiceMonitor" {
				portName, _ := epm["port"].(string)
				for _, svc := range services {
					if namespaces(svc.GetNamespace()) && selectorMatches(&sel, svc.GetLabels()) {
						out = append(out, serviceTargets(svc, portName, epm["targetPort"], pods, why)...)
					}
				}
			} else {
				for _, p := range pods {
					if namespaces(p.namespace) && selectorMatches(&sel, p.labels) {
						if port, ok := podMonitorPort(epm, p); ok {
							out = append(out, target{pod: p, port: port, why: why})
						}
					}
				}
			}
			if len(out) == before {
				misses = append(misses, fmt.Sprintf("%s endpoint %v resolves to no rendered pod and port: its scrape is not checked (declare its pods in %s)", monitor, endpointName(epm), FlowsFile))
			}
		}
	}
	return out, misses
}

// podMonitorPort is the port a PodMonitor endpoint scrapes on p: a named container port, a
// port number, or the deprecated targetPort (name or number).
func podMonitorPort(ep map[string]any, p netPeer) (int32, bool) {
	name, _ := ep["port"].(string)
	if name == "" {
		if n, ok, _ := unstructured.NestedInt64(ep, "portNumber"); ok {
			return int32(n), true
		}
		switch tp := ep["targetPort"].(type) {
		case string:
			name = tp
		case int64:
			return int32(tp), true
		}
	}
	named, ok := p.ports[name]
	return named.number, ok && name != ""
}

func endpointName(ep map[string]any) any {
	for _, k := range []string{"port", "portNumber", "targetPort"} {
		if v, ok := ep[k]; ok {
			return v
		}
	}
	return "(no port)"
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
func routeBackends(objs []*unstructured.Unstructured, pods []netPeer) (out []target, misses []string) {
	services := map[string]*unstructured.Unstructured{}
	for _, s := range objectsOf(objs, "", "Service") {
		services[s.GetNamespace()+"/"+s.GetName()] = s
	}
	for _, r := range objs {
		if r.GroupVersionKind().Group != "gateway.networking.k8s.io" || (r.GetKind() != "HTTPRoute" && r.GetKind() != "GRPCRoute") {
			continue
		}
		route := fmt.Sprintf("%s %s/%s", r.GetKind(), r.GetNamespace(), r.GetName())
		why := route + " to its backend"
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		for _, rule := range rules {
			rm, _ := rule.(map[string]any)
			refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
			for _, ref := range refs {
				b, _ := ref.(map[string]any)
				if g, _ := b["group"].(string); g == inferencePoolGK.Group {
					if kind, _ := b["kind"].(string); kind == inferencePoolGK.Kind {
						found, m := poolTargets(objs, services, r, b, pods)
						out, misses = append(out, found...), append(misses, m...)
					}
					continue
				}
				if kind, _ := b["kind"].(string); kind != "" && kind != "Service" {
					continue
				}
				name, _ := b["name"].(string)
				ns, _ := b["namespace"].(string)
				if ns == "" {
					ns = r.GetNamespace()
				}
				port, _, _ := unstructured.NestedInt64(b, "port")
				found := backendTargets(services[ns+"/"+name], port, pods, why)
				if len(found) == 0 {
					misses = append(misses, fmt.Sprintf("%s backend %s/%s:%d resolves to no rendered pod and port: its traffic is not checked", route, ns, name, port))
				}
				out = append(out, found...)
			}
		}
	}
	return out, misses
}

// poolTargets resolves a route's InferencePool backend ref to the pods it sends to: the pool's
// pods on its target ports, and its endpoint picker's pods on the picker's port (the Gateway asks
// the picker first: a picker it cannot reach fails every request of the route).
func poolTargets(objs []*unstructured.Unstructured, services map[string]*unstructured.Unstructured, r *unstructured.Unstructured, ref map[string]any, pods []netPeer) (out []target, misses []string) {
	route := fmt.Sprintf("%s %s/%s", r.GetKind(), r.GetNamespace(), r.GetName())
	name, _ := ref["name"].(string)
	ns, _ := ref["namespace"].(string)
	if ns == "" {
		ns = r.GetNamespace()
	}
	var pool *unstructured.Unstructured
	for _, p := range objectsOf(objs, inferencePoolGK.Group, inferencePoolGK.Kind) {
		if p.GetNamespace() == ns && p.GetName() == name {
			pool = p
		}
	}
	if pool == nil {
		return nil, []string{fmt.Sprintf("%s backend InferencePool %s/%s is not rendered: its traffic is not checked", route, ns, name)}
	}
	poolName := fmt.Sprintf("InferencePool %s/%s", ns, name)
	sel, _, _ := unstructured.NestedStringMap(pool.Object, "spec", "selector", "matchLabels")
	ports, _, _ := unstructured.NestedSlice(pool.Object, "spec", "targetPorts")
	for _, p := range pods {
		if len(sel) == 0 || p.namespace != ns || !labels.SelectorFromSet(sel).Matches(labels.Set(p.labels)) {
			continue
		}
		for _, tp := range ports {
			if n, _, _ := unstructured.NestedInt64(asMap(tp), "number"); n > 0 {
				out = append(out, target{pod: p, port: int32(n), why: route + " to the pods of " + poolName})
			}
		}
	}
	if len(out) == 0 {
		misses = append(misses, fmt.Sprintf("%s backend %s selects no rendered pod: its traffic is not checked", route, poolName))
	}
	epp, _, _ := unstructured.NestedString(pool.Object, "spec", "endpointPickerRef", "name")
	eppPort, _, _ := unstructured.NestedInt64(pool.Object, "spec", "endpointPickerRef", "port", "number")
	picker := backendTargets(services[ns+"/"+epp], eppPort, pods, "the Gateway asks the endpoint picker of "+poolName+" ("+route+")")
	if len(picker) == 0 {
		misses = append(misses, fmt.Sprintf("%s: the endpoint picker %s/%s:%d of %s resolves to no rendered pod and port: its traffic is not checked", route, ns, epp, eppPort, poolName))
	}
	return append(out, picker...), misses
}

// backendTargets resolves a route's backend Service port to the pods behind it.
func backendTargets(svc *unstructured.Unstructured, port int64, pods []netPeer, why string) []target {
	if svc == nil || port == 0 {
		return nil
	}
	var out []target
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
