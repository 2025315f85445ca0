package cost

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Step gives each drift that changes GPU capacity its cost per hour (drift.Object.Cost): a
// workload's against its live object, a ScaledObject's minimum against its target's GPUs (Git's
// target), at the prices the group's PrometheusRules state. Give it to the auditor
// (audit.Config.Steps).
type Step struct{}

// Start reads the group's prices at the first drift that changes GPUs.
func (Step) Start(c drift.Compared) func(o *drift.Object) {
	var prices *Prices
	return func(o *drift.Object) {
		if !Changes(o) {
			return
		}
		if prices == nil {
			prices = &Prices{}
			for _, r := range c.Rendered("PrometheusRule") {
				prices.AddRules(r)
			}
		}
		o.Cost = of(c, o, prices)
	}
}

// of is what o's drift costs per hour, nil when it changes no GPU capacity.
func of(c drift.Compared, o *drift.Object, prices *Prices) *drift.Cost {
	k := drift.RefOfObject(o)
	d, ok := c.Desired(o, k)
	if !ok {
		return nil
	}
	if o.Kind == "ScaledObject" {
		kind, _, _ := unstructured.NestedString(d.Object, "spec", "scaleTargetRef", "kind")
		name, _, _ := unstructured.NestedString(d.Object, "spec", "scaleTargetRef", "name")
		apiVersion, _, _ := unstructured.NestedString(d.Object, "spec", "scaleTargetRef", "apiVersion")
		if kind == "" {
			kind = "Deployment" // KEDA's default
		}
		group := "apps"
		if apiVersion != "" {
			group, _, _ = strings.Cut(apiVersion, "/")
			if !strings.Contains(apiVersion, "/") {
				group = ""
			}
		}
		target, _ := c.Desired(o, drift.Ref{Group: group, Kind: kind, Namespace: k.Namespace, Name: name})
		return OfScaledObject(o, target, prices)
	}
	l, ok := c.Live(o)
	if !ok {
		return nil
	}
	return OfDrift(o, d, l, prices)
}
