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

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// PriceRecord is the recording rule that states a card's price per hour.
const PriceRecord = "llm:gpu_price_usd_per_hour"

// GPUResource is the extended resource a pod asks GPUs by.
const GPUResource = "nvidia.com/gpu"

// Prices are the GPU prices per hour (USD), by card (lower case). A card two rules price
// differently is kept apart: its cost is not given.
type Prices struct {
	usd       map[string]float64
	conflicts map[string]bool
}

// Price returns a card's price per hour, and why there is none.
func (p *Prices) Price(card string) (float64, string) {
	card = strings.ToLower(card)
	switch {
	case card == "":
		return 0, "the card is not known: the pod names none, or several"
	case p.conflicts[card]:
		return 0, fmt.Sprintf("the %s rules give %s two prices", PriceRecord, card)
	}
	v, ok := p.usd[card]
	if !ok {
		return 0, fmt.Sprintf("no price for %s in the %s rules", card, PriceRecord)
	}
	return v, ""
}

// AddRules adds the prices a PrometheusRule states: each rule recording PriceRecord whose
// expression is vector(N), for the card its accelerator label names. Other objects and rules are
// skipped.
func (p *Prices) AddRules(u *unstructured.Unstructured) {
	if u.GetKind() != "PrometheusRule" {
		return
	}
	if p.usd == nil {
		p.usd, p.conflicts = map[string]float64{}, map[string]bool{}
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
			card = strings.ToLower(card)
			expr, _ := rule["expr"].(string)
			v, ok := vector(expr)
			if !ok || card == "" {
				continue
			}
			if old, seen := p.usd[card]; seen && old != v {
				p.conflicts[card] = true
			}
			p.usd[card] = v
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

// PodGPUs are the GPUs one pod of workload u takes (its containers' nvidia.com/gpu limits; init
// containers run before them and add none) and the card it is placed on (Card).
func PodGPUs(u *unstructured.Unstructured) (gpus int64, card string) {
	pod, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	return GPUs(pod), Card(pod)
}

// GPUs are the GPUs a pod (its spec) takes: its containers' nvidia.com/gpu limits (init
// containers run before them and add none).
func GPUs(pod map[string]any) int64 {
	var gpus int64
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	for _, c := range containers {
		limit, _, _ := unstructured.NestedFieldNoCopy(asMap(c), "resources", "limits", GPUResource)
		if n, ok := quantity(limit); ok {
			gpus += n
		}
	}
	return gpus
}

// Card is the GPU card a pod (its spec) is placed on: the one its accelerator label names (this
// repository's), else the one Cards names; "" when none is named, or several.
func Card(pod map[string]any) string {
	sel, _, _ := unstructured.NestedStringMap(pod, "nodeSelector")
	if v := sel["accelerator"]; v != "" {
		return strings.ToLower(v)
	}
	cards := slices.Compact(slices.Sorted(slices.Values(Cards(pod))))
	if len(cards) == 1 {
		return cards[0]
	}
	return ""
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

// costed are the kinds whose pods are spec.replicas copies of spec.template: the kinds a cost
// is given for.
var costed = []string{"Deployment", "StatefulSet", "ReplicaSet"}

// OfDrift is what o's drift costs per hour against Git: a replica count or a GPU limit changed by
// hand on a Deployment, StatefulSet or ReplicaSet, from Git's object (desired) and the live one.
// The GPUs are each side's GPUs per pod times its replicas. Replicas left to an autoscaler (not
// drift) count at the live number on both sides: only the hand edit is costed. Nil when the
// drift changes no GPU capacity.
func OfDrift(o *drift.Object, desired, live *unstructured.Unstructured, prices *Prices) *drift.Cost {
	if !Changes(o) || desired == nil || live == nil || !slices.Contains(costed, desired.GetKind()) {
		return nil
	}
	gitPerPod, card := PodGPUs(desired)
	livePerPod, liveCard := PodGPUs(live)
	if card == "" {
		card = liveCard
	}
	liveReplicas := replicas(live)
	gitReplicas := liveReplicas
	var what []string
	for _, f := range o.Fields {
		if f.Path == ".spec.replicas" {
			gitReplicas = replicas(desired)
			what = append(what, fmt.Sprintf("replicas %d → %d", gitReplicas, liveReplicas))
		}
	}
	if gitPerPod != livePerPod {
		what = append(what, fmt.Sprintf("%s %d → %d per pod", GPUResource, gitPerPod, livePerPod))
	}
	delta := livePerPod*liveReplicas - gitPerPod*gitReplicas
	if delta == 0 {
		return nil
	}
	return prices.add(priced(delta, card, strings.Join(what, ", "), ""))
}

// add puts the cost in USD per hour on c, at its card's price, or says why there is none.
func (p *Prices) add(c *drift.Cost) *drift.Cost {
	price, why := p.Price(c.Card)
	if why != "" {
		c.Note += " (" + why + ")"
		return c
	}
	usd := math.Round(float64(c.GPUs)*price*100) / 100
	c.USDPerHour = &usd
	c.Note += fmt.Sprintf(", about %+.2f USD per hour at the stated price", usd)
	return c
}

// replicas is a workload's spec.replicas (1 when it has none, the API server's default).
func replicas(u *unstructured.Unstructured) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas")
	if n, ok := number(v); ok {
		return n
	}
	return 1
}

// Changes says whether o's drift may change GPU capacity: a replica count or a GPU limit.
func Changes(o *drift.Object) bool {
	if o.Status != drift.Modified {
		return false
	}
	for _, f := range o.Fields {
		if Costs(o.Kind, f.Path) {
			return true
		}
	}
	return false
}

// Costs says whether a drift of the field at path of an object of kind may change GPU capacity:
// replicas, a container's GPU limit, a ScaledObject's minimum.
func Costs(kind, path string) bool {
	return path == ".spec.replicas" || GPUField(path) || kind == "ScaledObject" && path == ".spec.minReplicaCount"
}

// OfScaledObject is what a KEDA ScaledObject's minReplicaCount changed by hand costs per hour at
// least: the floor of replicas it keeps, times the GPUs per pod of its target (Git's object),
// whatever the load. Nil when the target asks no GPU, or the minimum did not change.
func OfScaledObject(o *drift.Object, target *unstructured.Unstructured, prices *Prices) *drift.Cost {
	if o.Kind != "ScaledObject" || o.Status != drift.Modified || target == nil {
		return nil
	}
	perPod, card := PodGPUs(target)
	for _, f := range o.Fields {
		if f.Path != ".spec.minReplicaCount" || perPod == 0 {
			continue
		}
		from, ok1 := number(f.Desired)
		to, ok2 := number(f.Live)
		if f.Desired == nil { // KEDA's default
			from, ok1 = 0, true
		}
		if f.Live == nil {
			to, ok2 = 0, true
		}
		if !ok1 || !ok2 || from == to {
			return nil
		}
		delta := (to - from) * perPod
		what := fmt.Sprintf("minimum replicas of %s %d → %d", target.GetName(), from, to)
		return prices.add(priced(delta, card, what, " at least"))
	}
	return nil
}

// priced is a Cost of delta GPUs on card, what explaining it.
func priced(delta int64, card, what, floor string) *drift.Cost {
	c := &drift.Cost{GPUs: delta, Card: card}
	on := ""
	if card != "" {
		on = " on " + card
	}
	c.Note = fmt.Sprintf("%s%s:%s %+d GPUs", what, on, floor, delta)
	return c
}

// GPUField says whether a drift field's path may change a pod's GPUs: a container's GPU limit
// (the report quotes a key holding a dot: limits["nvidia.com/gpu"]), or a whole container, its
// resources or its limits.
func GPUField(path string) bool {
	rest, ok := strings.CutPrefix(path, ".spec.template.spec.containers")
	if !ok {
		return false
	}
	_, rest, _ = strings.Cut(rest, "]")
	switch rest {
	case "", ".resources", ".resources.limits", `.resources.limits["` + GPUResource + `"]`:
		return true
	}
	return false
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

// quantity reads a resource quantity (a number or a string; absent: 0).
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
