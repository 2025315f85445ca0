// Package cost says what a change of GPU capacity costs per hour, at the GPU prices the platform
// states in one place: its PrometheusRule's llm:gpu_price_usd_per_hour records, one per card
// (label accelerator), which the cost-per-1k-tokens rules use too.
package cost

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/drift"
)

// PriceRecord is the recording rule that states a card's price per hour.
const PriceRecord = "llm:gpu_price_usd_per_hour"

// GPUResource is the extended resource a pod asks GPUs by.
const GPUResource = "nvidia.com/gpu"

// Prices are the GPU prices per hour (USD), by card.
type Prices map[string]float64

// AddRules adds the prices a PrometheusRule states: each rule recording PriceRecord whose
// expression is vector(N), for the card its accelerator label names. Other objects and rules are
// skipped.
func (p Prices) AddRules(u *unstructured.Unstructured) {
	if u.GetKind() != "PrometheusRule" {
		return
	}
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(asMap(g), "rules")
		for _, r := range rules {
			rule := asMap(r)
			if rule["record"] != PriceRecord {
				continue
			}
			card, _, _ := unstructured.NestedString(rule, "labels", "accelerator")
			expr, _ := rule["expr"].(string)
			if v, ok := vector(expr); ok && card != "" {
				p[card] = v
			}
		}
	}
}

// vector reads the number of a PromQL vector(N) expression (a trailing comment allowed).
func vector(expr string) (float64, bool) {
	expr, _, _ = strings.Cut(expr, "#")
	inner, ok := strings.CutPrefix(strings.TrimSpace(expr), "vector(")
	if !ok {
		return 0, false
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(inner), 64)
	return v, err == nil
}

// PodGPUs are the GPUs one pod of workload u takes (its containers' nvidia.com/gpu limits) and
// the card it is placed on (Cards; "" when it names none, or several).
func PodGPUs(u *unstructured.Unstructured) (gpus int64, card string) {
	pod, ok, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	if !ok && u.GetKind() == "CronJob" {
		pod, _, _ = unstructured.NestedMap(u.Object, "spec", "jobTemplate", "spec", "template", "spec")
	}
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	for _, c := range containers {
		limit, _, _ := unstructured.NestedFieldNoCopy(asMap(c), "resources", "limits", GPUResource)
		if q, err := resource.ParseQuantity(fmt.Sprint(limit)); limit != nil && err == nil {
			gpus += q.Value()
		}
	}
	if cards := slices.Compact(slices.Sorted(slices.Values(Cards(pod)))); len(cards) == 1 {
		card = cards[0]
	}
	return gpus, card
}

// CardKeys are the node labels that name a node's GPU: this repository's own, Karpenter's on AWS,
// GPU feature discovery's, GKE's.
var CardKeys = []string{"accelerator", "karpenter.k8s.aws/instance-gpu-name", "nvidia.com/gpu.product", "cloud.google.com/gke-accelerator"}

// Cards returns the GPU cards a pod (its spec) may run on, as node labels spell them in lower
// case: from its nodeSelector and the In expressions of its required node affinity on CardKeys;
// nil when neither names one.
func Cards(pod map[string]any) []string {
	var out []string
	sel, _, _ := unstructured.NestedStringMap(pod, "nodeSelector")
	for _, k := range CardKeys {
		if v, ok := sel[k]; ok {
			out = append(out, strings.ToLower(v))
		}
	}
	terms, _, _ := unstructured.NestedSlice(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	for _, t := range terms {
		exprs, _, _ := unstructured.NestedSlice(asMap(t), "matchExpressions")
		for _, e := range exprs {
			m := asMap(e)
			key, _, _ := unstructured.NestedString(m, "key")
			op, _, _ := unstructured.NestedString(m, "operator")
			values, _, _ := unstructured.NestedStringSlice(m, "values")
			if op == "In" && slices.Contains(CardKeys, key) {
				for _, v := range values {
					out = append(out, strings.ToLower(v))
				}
			}
		}
	}
	return out
}

// OfDrift is what o's drift costs per hour against Git (desired is Git's object): a replica
// count or a GPU limit changed by hand on a workload that asks GPUs. Nil when its drift changes
// no GPU capacity.
func OfDrift(o *drift.Object, desired *unstructured.Unstructured, prices Prices) *drift.Cost {
	if o.Status != drift.Modified || desired == nil {
		return nil
	}
	gpus, card := PodGPUs(desired)
	replicas, ok := number(desiredField(desired, "spec", "replicas"))
	if !ok {
		replicas = 1
	}
	var delta int64
	var what []string
	for _, f := range o.Fields {
		switch {
		case f.Path == ".spec.replicas" && gpus > 0:
			from, ok1 := number(f.Desired)
			to, ok2 := number(f.Live)
			if !ok1 || !ok2 {
				continue
			}
			delta += (to - from) * gpus
			what = append(what, fmt.Sprintf("replicas %d → %d", from, to))
			replicas = to
		case gpuLimit(f.Path):
			from, ok1 := quantity(f.Desired) // absent on one side (added or removed): none
			to, ok2 := quantity(f.Live)
			if !ok1 || !ok2 {
				continue
			}
			delta += (to - from) * replicas
			what = append(what, fmt.Sprintf("%s %d → %d per pod", GPUResource, from, to))
		}
	}
	if len(what) == 0 || delta == 0 {
		return nil
	}
	c := &drift.Cost{GPUs: delta, Card: card}
	on := ""
	if card != "" {
		on = " on " + card
	}
	c.Note = fmt.Sprintf("%s%s: %+d GPUs", strings.Join(what, ", "), on, delta)
	price, known := prices[card]
	if !known {
		c.Note += fmt.Sprintf(" (no price for %q in the %s rules)", card, PriceRecord)
		return c
	}
	c.USDPerHour = math.Round(float64(delta)*price*100) / 100
	c.Note += fmt.Sprintf(", about %+.2f USD per hour", c.USDPerHour)
	return c
}

// Changes says whether o's drift may change GPU capacity: a replica count or a GPU limit.
func Changes(o *drift.Object) bool {
	if o.Status != drift.Modified {
		return false
	}
	for _, f := range o.Fields {
		if f.Path == ".spec.replicas" || gpuLimit(f.Path) {
			return true
		}
	}
	return false
}

// gpuLimit says whether a drift field's path is a container's GPU limit (the report quotes a key
// holding a dot: limits["nvidia.com/gpu"]).
func gpuLimit(path string) bool {
	return strings.HasSuffix(path, `.resources.limits["`+GPUResource+`"]`) || strings.HasSuffix(path, ".resources.limits."+GPUResource)
}

func desiredField(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

// number reads an integer a drift field holds (JSON numbers come as int64 or float64).
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == math.Trunc(n)
	}
	return 0, false
}

// quantity reads a resource quantity a drift field holds (a number or a string; absent: 0).
func quantity(v any) (int64, bool) {
	if v == nil {
		return 0, true
	}
	if n, ok := number(v); ok {
		return n, true
	}
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, false
	}
	return q.Value(), true
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
