package doctor

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// selectors are, per monitor kind, the Prometheus fields that select its objects and their
// namespaces.
var selectors = map[string][2]string{
	"ServiceMonitor": {"serviceMonitorSelector", "serviceMonitorNamespaceSelector"},
	"PodMonitor":     {"podMonitorSelector", "podMonitorNamespaceSelector"},
	"PrometheusRule": {"ruleSelector", "ruleNamespaceSelector"},
}

// prometheusChecks: every ServiceMonitor, PodMonitor and PrometheusRule the env renders is
// selected by a Prometheus of the Prometheus Operator, as the operator selects them: a null
// selector selects nothing, an empty one everything; a null namespace selector means the
// Prometheus's own namespace. Without it the platform's scrapes and alerts silently do nothing.
func prometheusChecks(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource) []Check {
	var monitors []*unstructured.Unstructured
	for _, o := range objs {
		if _, ok := selectors[o.GetKind()]; ok && o.GroupVersionKind().Group == "monitoring.coreos.com" {
			monitors = append(monitors, o)
		}
	}
	if len(monitors) == 0 {
		return nil
	}
	c := Check{Area: "object", Name: "a Prometheus selecting the monitors and rules"}
	if _, ok := served[schema.GroupVersion{Group: "monitoring.coreos.com", Version: "v1"}]["Prometheus"]; !ok {
		c.Detail = "the Prometheus kind (monitoring.coreos.com/v1) is not served"
		c.Fix = "install kube-prometheus-stack as release kube-prometheus-stack"
		return []Check{c}
	}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.Error, c.Detail = true, "cannot list Prometheuses: "+err.Error()
		return []Check{c}
	}
	nsLabels := namespaceLabels(ctx, dyn, objs)
	var missed []string
	for _, m := range monitors {
		if !anySelects(list.Items, m, nsLabels) {
			missed = append(missed, fmt.Sprintf("%s %s/%s", m.GetKind(), m.GetNamespace(), m.GetName()))
		}
	}
	if len(missed) == 0 {
		c.OK = true
		c.Detail = fmt.Sprintf("all %d selected", len(monitors))
		return []Check{c}
	}
	shown := missed
	if len(shown) > 4 {
		shown = append(shown[:4:4], fmt.Sprintf("%d more", len(missed)-4))
	}
	c.Detail = fmt.Sprintf("%d of %d selected by no Prometheus (of %d): %s", len(missed), len(monitors), len(list.Items), strings.Join(shown, ", "))
	c.Fix = "install kube-prometheus-stack as release kube-prometheus-stack (its Prometheus selects label release=kube-prometheus-stack), or change that label on the monitors"
	return []Check{c}
}

func anySelects(proms []unstructured.Unstructured, m *unstructured.Unstructured, nsLabels func(string) labels.Set) bool {
	fields := selectors[m.GetKind()]
	for _, p := range proms {
		sel, ok, _ := unstructured.NestedMap(p.Object, "spec", fields[0])
		if !ok || !matches(sel, m.GetLabels()) { // a null selector selects nothing
			continue
		}
		nsSel, ok, _ := unstructured.NestedMap(p.Object, "spec", fields[1])
		if !ok {
			if m.GetNamespace() == p.GetNamespace() {
				return true
			}
			continue
		}
		if matches(nsSel, nsLabels(m.GetNamespace())) {
			return true
		}
	}
	return false
}

// matches evaluates a label selector given as an unstructured map.
func matches(sel map[string]any, set map[string]string) bool {
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &ls); err != nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(&ls)
	return err == nil && s.Matches(labels.Set(set))
}

// namespaceLabels are a namespace's labels: the live Namespace's, else the rendered one's, with
// the name label the API server sets.
func namespaceLabels(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured) func(string) labels.Set {
	rendered := map[string]map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" {
			rendered[o.GetName()] = o.GetLabels()
		}
	}
	nsRes := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	return func(name string) labels.Set {
		out := labels.Set{"kubernetes.io/metadata.name": name}
		src := rendered[name] // before the first sync
		if live, err := nsRes.Get(ctx, name, metav1.GetOptions{}); err == nil {
			src = live.GetLabels()
		}
		for k, v := range src {
			out[k] = v
		}
		return out
	}
}
