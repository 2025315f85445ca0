package ledger

import (
	"math"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/platform/cost"
)

// Annotations and labels the vLLM manifests carry (base/vllm/*.yaml).
const (
	annModel           = "platform.llm/model"
	annWeightsURI      = "platform.llm/weights-uri"
	annWeightsRevision = "platform.llm/weights-revision"
	labelModelVersion  = "platform.llm/model-version"
)

// Serving is one served model version in a rendered environment.
type Serving struct {
	Model           string  `json:"model"`
	Deployment      string  `json:"deployment"`
	Namespace       string  `json:"namespace,omitempty"`
	Version         string  `json:"version"`
	WeightsURI      string  `json:"weightsURI,omitempty"`
	WeightsRevision string  `json:"weightsRevision,omitempty"`
	Image           string  `json:"image,omitempty"`
	SharePercent    float64 `json:"sharePercent"`
	Replicas        int64   `json:"replicas"`
	// Cost is what one replica costs, from the Deployment's GPUs and the platform's GPU prices.
	Cost
}

// Cost is what one replica of a served version costs: its GPUs, their card, and the price of
// one GPU-hour of that card from the platform's PrometheusRule (llm:gpu_price_usd_per_hour).
// Zero values: not known.
type Cost struct {
	GPUsPerReplica     int64   `json:"gpusPerReplica,omitempty"`
	Card               string  `json:"card,omitempty"`
	GPUPriceUSDPerHour float64 `json:"gpuPriceUSDPerHour,omitempty"`
}

// Key identifies the version within the environment.
func (s Serving) Key() string { return s.Model + "/" + s.Deployment }

// State is what an environment serves: key (model/deployment) → version.
type State map[string]Serving

// Sorted lists the state by model, then deployment.
func (st State) Sorted() []Serving {
	out := make([]Serving, 0, len(st))
	for _, s := range st {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].Deployment < out[j].Deployment
	})
	return out
}

// ServedState extracts the served models from rendered objects: every Deployment with the
// annotation (or label) platform.llm/model. Its share comes from the HTTPRoute rule whose
// backendRefs name the Service or InferencePool selecting the Deployment's pods; its warm minimum from the
// ScaledObject targeting it.
func ServedState(objs []*unstructured.Unstructured) State {
	var deployments, services, routes, scaled []*unstructured.Unstructured
	prices := &cost.Prices{}
	for _, o := range objs {
		prices.AddRules(o)
		switch o.GetKind() {
		case "Deployment":
			deployments = append(deployments, o)
		case "Service", "InferencePool":
			services = append(services, o)
		case "HTTPRoute":
			routes = append(routes, o)
		case "ScaledObject":
			scaled = append(scaled, o)
		}
	}
	st := State{}
	for _, d := range deployments {
		model := d.GetAnnotations()[annModel]
		if model == "" {
			model = d.GetLabels()[annModel]
		}
		if model == "" {
			continue
		}
		tmplLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		s := Serving{
			Model:           model,
			Deployment:      d.GetName(),
			Namespace:       d.GetNamespace(),
			Version:         tmplLabels[labelModelVersion],
			WeightsURI:      d.GetAnnotations()[annWeightsURI],
			WeightsRevision: d.GetAnnotations()[annWeightsRevision],
			Image:           image(d),
			SharePercent:    100,
			Replicas:        replicas(d, scaled),
		}
		if s.Version == "" {
			s.Version = d.GetName()
		}
		s.GPUsPerReplica, s.Card = cost.PodGPUs(d)
		if s.GPUsPerReplica > 0 {
			s.GPUPriceUSDPerHour, _ = prices.Price(s.Card)
		}
		if share, ok := share(d, tmplLabels, services, routes); ok {
			s.SharePercent = share
		}
		st[s.Key()] = s
	}
	return st
}

// image is the vLLM container's image (the container named vllm, else the first).
func image(d *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	first := ""
	for i, c := range cs {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		img, _ := m["image"].(string)
		if m["name"] == "vllm" {
			return img
		}
		if i == 0 {
			first = img
		}
	}
	return first
}

// replicas is the ScaledObject's minReplicaCount (KEDA's default 0 when unset) for a
// Deployment it targets, else spec.replicas (default 1).
func replicas(d *unstructured.Unstructured, scaled []*unstructured.Unstructured) int64 {
	for _, so := range scaled {
		if so.GetNamespace() != d.GetNamespace() {
			continue
		}
		name, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "name")
		kind, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "kind")
		if name != d.GetName() || (kind != "" && kind != "Deployment") {
			continue
		}
		n, found, _ := unstructured.NestedInt64(so.Object, "spec", "minReplicaCount")
		if !found {
			return 0
		}
		return n
	}
	n, found, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if !found {
		return 1
	}
	return n
}

// share finds the first HTTPRoute rule sending traffic to a Service or an InferencePool
// selecting the Deployment's pods and returns the Deployment's percentage of the rule's total
// weight. services holds both kinds.
func share(d *unstructured.Unstructured, podLabels map[string]string, services, routes []*unstructured.Unstructured) (float64, bool) {
	svcNames := map[string]bool{} // kind/name
	for _, s := range services {
		if s.GetNamespace() != d.GetNamespace() {
			continue
		}
		selPath := []string{"spec", "selector"}
		if s.GetKind() == "InferencePool" {
			selPath = append(selPath, "matchLabels")
		}
		sel, found, _ := unstructured.NestedStringMap(s.Object, selPath...)
		if !found || len(sel) == 0 {
			continue
		}
		match := true
		for k, v := range sel {
			if podLabels[k] != v {
				match = false
				break
			}
		}
		if match {
			svcNames[s.GetKind()+"/"+s.GetName()] = true
		}
	}
	if len(svcNames) == 0 {
		return 0, false
	}
	for _, rt := range routes {
		rules, _, _ := unstructured.NestedSlice(rt.Object, "spec", "rules")
		for _, rule := range rules {
			rm, ok := rule.(map[string]any)
			if !ok {
				continue
			}
			refs, _ := rm["backendRefs"].([]any)
			var total, mine float64
			hit := false
			for _, ref := range refs {
				m, ok := ref.(map[string]any)
				if !ok {
					continue
				}
				w := 1.0 // Gateway API default weight
				if v, ok := m["weight"]; ok {
					w = toFloat(v)
				}
				total += w
				kind, _ := m["kind"].(string)
				if kind == "" {
					kind = "Service"
				}
				ns, _ := m["namespace"].(string)
				if ns == "" {
					ns = rt.GetNamespace()
				}
				name, _ := m["name"].(string)
				if ns == d.GetNamespace() && svcNames[kind+"/"+name] {
					mine += w
					hit = true
				}
			}
			if !hit {
				continue
			}
			if total == 0 {
				return 0, true
			}
			return math.Round(mine/total*100*100) / 100, true
		}
	}
	return 0, false
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// diffState compares two states and returns, per key (sorted), the kind and the changed fields.
type delta struct {
	kind    Kind
	changes []string
	s       Serving
}

func diffState(prev, next State) []delta {
	keys := map[string]bool{}
	for k := range prev {
		keys[k] = true
	}
	for k := range next {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []delta
	for _, k := range sorted {
		p, inPrev := prev[k]
		n, inNext := next[k]
		switch {
		case !inPrev:
			out = append(out, delta{kind: KindAdded, s: n})
		case !inNext:
			out = append(out, delta{kind: KindRetired, s: p})
		default:
			var ch []string
			if p.WeightsURI != n.WeightsURI || p.WeightsRevision != n.WeightsRevision {
				ch = append(ch, FieldWeights)
			}
			if p.Version != n.Version {
				ch = append(ch, FieldVersion)
			}
			if p.SharePercent != n.SharePercent {
				ch = append(ch, FieldShare)
			}
			if p.Image != n.Image {
				ch = append(ch, FieldImage)
			}
			if p.Replicas != n.Replicas {
				ch = append(ch, FieldReplicas)
			}
			if len(ch) > 0 {
				out = append(out, delta{kind: KindChanged, changes: ch, s: n})
			}
		}
	}
	return out
}
