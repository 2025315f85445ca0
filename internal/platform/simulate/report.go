package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// report reads where every pod went and judges it.
func report(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured, opts Options, ns []*corev1.Node, preempted []string) (*Report, error) {
	nodeByName := map[string]*corev1.Node{}
	pools := map[string]*PoolReport{}
	for _, n := range ns {
		nodeByName[n.Name] = n
		pool := n.Labels["platform.llm/pool"]
		pr := pools[pool]
		if pr == nil {
			pr = &PoolReport{Pool: pool, Pods: []string{}}
			pools[pool] = pr
		}
		pr.Nodes++
		g := n.Status.Allocatable[gpuResource]
		pr.GPUs += g.Value()
	}
	// DaemonSets (node agents) may run on GPU nodes without a GPU (policies/gpu-taint-only-gpu-pods.yaml).
	agents := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			agents[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	rep := &Report{Env: opts.Env, Pending: []Pending{}, Violations: []Violation{}, Preempted: preempted}
	if rep.Preempted == nil {
		rep.Preempted = []string{}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		id := p.Namespace + "/" + p.Name
		if p.Spec.NodeName == "" {
			reason := ""
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					reason = c.Message
				}
			}
			if strings.Contains(reason, "untolerated taint") {
				reason += " Untolerated: " + strings.Join(untolerated(p, ns), ", ")
			}
			rep.Pending = append(rep.Pending, Pending{Pod: id, Reason: reason})
			continue
		}
		n := nodeByName[p.Spec.NodeName]
		if n == nil {
			continue
		}
		pr := pools[n.Labels["platform.llm/pool"]]
		pr.Pods = append(pr.Pods, id)
		gpus := podGPUs(p)
		pr.GPUsUsed += gpus
		nodeGPUs := n.Status.Allocatable[gpuResource]
		switch {
		case gpus == 0 && nodeGPUs.Value() > 0 && !isAgent(p, agents):
			rep.Violations = append(rep.Violations, Violation{Rule: "non-gpu-pod-on-gpu-node", Pod: id, Node: n.Name,
				Message: "a pod without a GPU took room on a GPU node"})
		case gpus > 0 && nodeGPUs.Value() == 0:
			rep.Violations = append(rep.Violations, Violation{Rule: "gpu-pod-on-cpu-node", Pod: id, Node: n.Name,
				Message: "a GPU pod was placed on a node without GPUs"})
		case gpus > 0:
			cards := requiredValues(p, "accelerator")
			card := n.Labels["accelerator"]
			if !slices.Contains(cards, card) {
				rep.Violations = append(rep.Violations, Violation{Rule: "gpu-pod-on-wrong-card", Pod: id, Node: n.Name,
					Message: fmt.Sprintf("placed on accelerator=%s; its required affinity allows %v", card, cards)})
			}
		}
	}
	for _, pr := range pools {
		sort.Strings(pr.Pods)
		rep.Pools = append(rep.Pools, *pr)
	}
	sort.Slice(rep.Pools, func(i, j int) bool { return rep.Pools[i].Pool < rep.Pools[j].Pool })
	sort.Slice(rep.Pending, func(i, j int) bool { return rep.Pending[i].Pod < rep.Pending[j].Pod })
	return rep, nil
}

// untolerated lists the node taints the pod does not tolerate, as key=value:effect.
func untolerated(p *corev1.Pod, ns []*corev1.Node) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range ns {
		for _, t := range n.Spec.Taints {
			ok := false
			for _, tol := range p.Spec.Tolerations {
				if tol.ToleratesTaint(klog.Background(), &t, false) {
					ok = true
				}
			}
			s := t.Key + "=" + t.Value + ":" + string(t.Effect)
			if !ok && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Limits[gpuResource]
		n += q.Value()
	}
	return n
}

func isAgent(p *corev1.Pod, agents map[string]bool) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller && agents[p.Namespace+"/"+o.Name] {
			return true
		}
	}
	return false
}

func requiredValues(p *corev1.Pod, key string) []string {
	var out []string
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	for _, t := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Key == key && e.Operator == corev1.NodeSelectorOpIn {
				out = append(out, e.Values...)
			}
		}
	}
	return out
}
