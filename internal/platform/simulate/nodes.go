// Package simulate proves placement with the real kube-scheduler: it models the env's NodePools as
// Node objects (labels, taints, allocatable cpu, memory and nvidia.com/gpu), applies the rendered
// overlay, lets kube-controller-manager create the Pods and kube-scheduler bind them (there is no
// kubelet: pods are bound, never run), and reports placement per pool and every violation of
// "the taint repels everyone else; toleration plus affinity puts the model there".
package simulate

import (
	"fmt"
	"os"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// NodeGroup is a set of identical nodes of one pool.
type NodeGroup struct {
	Pool   string            `json:"pool"`
	Count  int               `json:"count"`
	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
	CPU    string            `json:"cpu"`
	Memory string            `json:"memory"`
	GPUs   int64             `json:"gpus,omitempty"`
	// Zones are the zones the group's nodes are spread over, round-robin (label
	// topology.kubernetes.io/zone). Empty: DefaultZones.
	Zones []string `json:"zones,omitempty"`
}

// ZoneLabel is the well-known label of a node's zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// DefaultZones are the zones of a NodePool that names none: Karpenter then launches in any zone
// of its node class's subnets, modelled as three.
var DefaultZones = []string{"zone-a", "zone-b", "zone-c"}

// NodesFile overrides the node model: `groups:` as NodeGroup list (e.g. two GPU cards).
type NodesFile struct {
	Groups []NodeGroup `json:"groups"`
}

// LoadNodes reads a nodes file.
func LoadNodes(path string) ([]NodeGroup, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nodes file: %w", err)
	}
	var f NodesFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("nodes file %s: %w", path, err)
	}
	return f.Groups, nil
}

// Node sizes by pool when nothing else says: enough for the platform's pods.
var defaultSize = map[string][2]string{"system": {"8", "32Gi"}, "cpu": {"16", "64Gi"}, "gpu": {"32", "256Gi"}}

// GroupsFromNodePools models each Karpenter NodePool: its template labels, single-valued In
// requirements as labels, its taints, and as many nodes as its limits allow (at most 16).
func GroupsFromNodePools(objs []*unstructured.Unstructured) []NodeGroup {
	var out []NodeGroup
	for _, o := range objs {
		if o.GetKind() != "NodePool" {
			continue
		}
		labels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		if labels == nil {
			labels = map[string]string{}
		}
		gpusPerNode := int64(0)
		reqs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "requirements")
		var zones []string
		for _, r := range reqs {
			m := r.(map[string]any)
			vals, _, _ := unstructured.NestedStringSlice(m, "values")
			if m["operator"] == "In" && m["key"] == ZoneLabel {
				zones = vals
				continue
			}
			if m["operator"] == "In" && len(vals) == 1 {
				labels[fmt.Sprint(m["key"])] = vals[0]
				if m["key"] == "karpenter.k8s.aws/instance-gpu-count" {
					gpusPerNode, _ = strconv.ParseInt(vals[0], 10, 64)
				}
			}
		}
		pool := labels["platform.llm/pool"]
		if pool == "" {
			pool = o.GetName()
		}
		var taints []corev1.Taint
		ts, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "taints")
		for _, t := range ts {
			m := t.(map[string]any)
			taints = append(taints, corev1.Taint{Key: fmt.Sprint(m["key"]), Value: str(m["value"]), Effect: corev1.TaintEffect(fmt.Sprint(m["effect"]))})
		}
		size := defaultSize[pool]
		if size[0] == "" {
			size = defaultSize["cpu"]
		}
		g := NodeGroup{Pool: pool, Labels: labels, Taints: taints, CPU: size[0], Memory: size[1], Count: 2, Zones: zones}
		limits, _, _ := unstructured.NestedMap(o.Object, "spec", "limits")
		if v, ok := limits["nvidia.com/gpu"]; ok {
			if gpusPerNode == 0 {
				gpusPerNode = 1
			}
			g.GPUs = gpusPerNode
			g.Count = int(quantity(v) / gpusPerNode)
		} else if v, ok := limits["cpu"]; ok {
			g.Count = int(quantity(v) / quantity(size[0]))
		}
		g.Count = max(1, min(g.Count, 16))
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func quantity(v any) int64 {
	q, err := resource.ParseQuantity(fmt.Sprint(v))
	if err != nil {
		return 0
	}
	return q.Value()
}

// Nodes turns groups into Node objects named <pool>-<card>-<n>, annotated for kwok: where kwok runs
// (the test cluster's nodes), it keeps them Ready and runs the Pods bound to them. The nodes of a
// group take its zones in turn.
func Nodes(groups []NodeGroup) []*corev1.Node {
	var out []*corev1.Node
	for _, g := range groups {
		zones := g.Zones
		if len(zones) == 0 {
			zones = DefaultZones
		}
		for i := range g.Count {
			name := g.Pool
			if card := g.Labels["accelerator"]; card != "" {
				name += "-" + card
			}
			name = fmt.Sprintf("%s-%d", name, i)
			labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
			for k, v := range g.Labels {
				labels[k] = v
			}
			labels[ZoneLabel] = zones[i%len(zones)]
			alloc := corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(g.CPU), corev1.ResourceMemory: resource.MustParse(g.Memory),
				corev1.ResourcePods: resource.MustParse("110"),
			}
			if g.GPUs > 0 {
				alloc["nvidia.com/gpu"] = *resource.NewQuantity(g.GPUs, resource.DecimalSI)
			}
			n := &corev1.Node{}
			n.Name, n.Labels = name, labels
			n.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
			n.Spec.Taints = g.Taints
			n.Status.Capacity, n.Status.Allocatable = alloc, alloc
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "SimulatedKubelet"}}
			out = append(out, n)
		}
	}
	return out
}
