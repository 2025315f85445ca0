package simulate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// cluster starts a four-process cluster for one scenario: nodes are cluster-wide, so scenarios
// cannot share one. Without binaries the scenario is skipped (testcluster.Need says when it fails).
func cluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	testcluster.Need(t)
	start := time.Now()
	c, err := testcluster.Start(context.Background(), testcluster.Options{Scheduler: true, ControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Logf("four-process cluster started in %s", time.Since(start).Round(100*time.Millisecond))
	return c
}

func prod(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	src, err := render.FromDir("../../..")
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Objects
}

// edit changes the pod template of a workload.
func edit(objs []*unstructured.Unstructured, name string, f func(pod map[string]any)) {
	for _, o := range objs {
		if o.GetName() == name && o.GetKind() == "Deployment" {
			spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			f(spec)
			_ = unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec")
		}
	}
}

func gpuGroups(cards map[string]int) []NodeGroup {
	groups := []NodeGroup{
		{Pool: "system", Count: 2, CPU: "8", Memory: "32Gi", Labels: map[string]string{"platform.llm/pool": "system"}},
		{Pool: "cpu", Count: 3, CPU: "16", Memory: "64Gi", Labels: map[string]string{"platform.llm/pool": "cpu"}},
	}
	for card, n := range cards {
		groups = append(groups, NodeGroup{Pool: "gpu", Count: n, CPU: "32", Memory: "256Gi", GPUs: 1,
			Labels: map[string]string{"platform.llm/pool": "gpu", "accelerator": card},
			Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}})
	}
	return groups
}

func run(t *testing.T, c *testcluster.Cluster, objs []*unstructured.Unstructured, groups []NodeGroup) *Report {
	t.Helper()
	start := time.Now()
	rep, err := Run(context.Background(), c.Config, objs, Options{Env: "prod", Groups: groups, RunCronJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("simulation took %s", time.Since(start).Round(100*time.Millisecond))
	return rep
}

func TestProdPlacesModelsOnTheirCardsOnly(t *testing.T) {
	c := cluster(t)
	rep := run(t, c, prod(t), nil) // nodes from the overlay's NodePools
	if len(rep.Violations) != 0 {
		t.Fatalf("violations: %+v", rep.Violations)
	}
	var gpu *PoolReport
	for i := range rep.Pools {
		if rep.Pools[i].Pool == "gpu" {
			gpu = &rep.Pools[i]
		}
	}
	if gpu == nil || gpu.GPUs != 16 {
		t.Fatalf("gpu pool %+v, want 16 cards from the NodePool limit", gpu)
	}
	vllm := 0
	for _, p := range gpu.Pods {
		name := p[strings.Index(p, "/")+1:]
		switch {
		case strings.HasPrefix(name, "vllm-"):
			vllm++
		case strings.HasPrefix(name, "dcgm-exporter"), strings.HasPrefix(name, "night-transcription"), strings.HasPrefix(name, "reindex-corpus"):
		default:
			t.Errorf("%s landed on the GPU pool", p)
		}
	}
	if vllm != 4 { // qwen 2, llama 1, canary 1
		t.Errorf("%d vLLM pods on the GPU pool, want 4; pending: %+v", vllm, rep.Pending)
	}
	for _, p := range rep.Pending {
		if strings.Contains(p.Pod, "vllm-") {
			t.Errorf("vLLM pod pending: %+v", p)
		}
	}
}

func TestDroppedAffinityIsCaught(t *testing.T) {
	c := cluster(t)
	objs := prod(t)
	edit(objs, "vllm-llama", func(pod map[string]any) { delete(pod, "affinity") })
	// l40s cards for everyone else (qwen 2, canary 1, two night jobs), t4 beside them.
	rep := run(t, c, objs, gpuGroups(map[string]int{"l40s": 5, "t4": 2}))
	found := false
	for _, v := range rep.Violations {
		if strings.Contains(v.Pod, "vllm-llama") && v.Rule == "gpu-pod-on-wrong-card" {
			found = true
		}
	}
	if !found {
		t.Fatalf("llama without affinity not caught: violations %+v pools %+v", rep.Violations, rep.Pools)
	}
}

func TestDroppedTolerationIsPendingOnTheTaint(t *testing.T) {
	c := cluster(t)
	objs := prod(t)
	edit(objs, "vllm-llama", func(pod map[string]any) { delete(pod, "tolerations") })
	rep := run(t, c, objs, nil)
	for _, p := range rep.Pending {
		if strings.Contains(p.Pod, "vllm-llama") {
			if !strings.Contains(p.Reason, "untolerated taint") || !strings.Contains(p.Reason, "nvidia.com/gpu=present:NoSchedule") {
				t.Errorf("pending for another reason: %s", p.Reason)
			}
			return
		}
	}
	t.Fatalf("llama without toleration is not pending: %+v", rep)
}

func TestGPUShortagePreemptsBatchForInference(t *testing.T) {
	c := cluster(t)
	all := prod(t)
	var batchFirst []*unstructured.Unstructured
	for _, o := range all {
		if !(o.GetKind() == "Deployment" && strings.HasPrefix(o.GetName(), "vllm-")) {
			batchFirst = append(batchFirst, o)
		}
	}
	groups := gpuGroups(map[string]int{"l40s": 3})
	// The night jobs hold two of the three cards...
	first := run(t, c, batchFirst, groups)
	if used := gpuUsed(first); used != 2 {
		t.Fatalf("batch placed on %d cards, want 2: %+v", used, first.Pools)
	}
	// ...then inference arrives (4 pods, priority llm-interactive) wanting more cards than exist:
	// batch must yield its cards, and what still does not fit waits.
	rep := run(t, c, all, groups)
	if len(rep.Preempted) == 0 {
		t.Fatalf("nothing preempted: %+v", rep)
	}
	for _, p := range rep.Preempted {
		if !strings.Contains(p, "llm-batch/") {
			t.Errorf("preempted %s, want only batch pods", p)
		}
	}
	var gpu PoolReport
	for _, p := range rep.Pools {
		if p.Pool == "gpu" {
			gpu = p
		}
	}
	inference := 0
	for _, p := range gpu.Pods {
		if strings.Contains(p, "/vllm-") {
			inference++
		}
	}
	if inference != 3 || gpu.GPUsUsed != 3 {
		t.Errorf("GPU pool holds %d inference pods on %d cards, want all 3 cards to inference: %+v", inference, gpu.GPUsUsed, gpu.Pods)
	}
	pendingVLLM := 0
	for _, p := range rep.Pending {
		if strings.Contains(p.Pod, "/vllm-") {
			pendingVLLM++
			if !strings.Contains(p.Reason, "Insufficient nvidia.com/gpu") {
				t.Errorf("inference pending for another reason: %s", p.Reason)
			}
		}
	}
	if pendingVLLM != 1 {
		t.Errorf("%d inference pods pending, want the 1 that has no card: %+v", pendingVLLM, rep.Pending)
	}
}

func gpuUsed(r *Report) int64 {
	for _, p := range r.Pools {
		if p.Pool == "gpu" {
			return p.GPUsUsed
		}
	}
	return 0
}

// TestFailedNodesMoveTheirPods takes away, once prod's placement settled, a CPU node and every
// L40S node: the real controllers and scheduler re-place what ran there. The CPU node's pods
// come back on the other CPU nodes; the vLLM pods, which only L40S cards take, are pending.
func TestFailedNodesMoveTheirPods(t *testing.T) {
	c := cluster(t)
	groups := gpuGroups(map[string]int{"l40s": 6, "t4": 2})
	fail := []string{"cpu-0"}
	for i := range 6 {
		fail = append(fail, fmt.Sprintf("gpu-l40s-%d", i))
	}
	rep, err := Run(context.Background(), c.Config, prod(t), Options{Env: "prod", Groups: groups, RunCronJobs: true, FailNodes: fail})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failure == nil || len(rep.Failure.Lost) == 0 {
		t.Fatalf("no pod lost: %+v", rep.Failure)
	}
	owner := func(pod string) string { // namespace/name without the ReplicaSet's and the pod's suffixes
		parts := strings.Split(pod, "-")
		if len(parts) > 2 {
			parts = parts[:len(parts)-2]
		}
		return strings.Join(parts, "-")
	}
	replaced := map[string]string{}
	for _, p := range rep.Failure.Replaced {
		replaced[owner(p.Pod)] = p.Node
		if slices.Contains(fail, p.Node) {
			t.Errorf("%s replaced on failed node %s", p.Pod, p.Node)
		}
	}
	pending := map[string]string{}
	for _, p := range rep.Pending {
		pending[owner(p.Pod)] = p.Reason
	}
	var lostCPU, lostVLLM int
	for _, lost := range rep.Failure.Lost {
		o := owner(lost)
		switch {
		case strings.Contains(lost, "/vllm-"):
			lostVLLM++
			if _, ok := pending[o]; !ok {
				t.Errorf("%s lost with its L40S node: its replacement should be pending (replaced on %q)", lost, replaced[o])
			}
		// A Job's pod (the night's batch, a weights sync) comes back after the Job controller's
		// backoff (10 s and up), which may be past the settle: only the others must be back.
		case !strings.Contains(lost, "night-") && !strings.Contains(lost, "reindex-") && !strings.Contains(lost, "weights-sync-"):
			lostCPU++
			if node, ok := replaced[o]; !ok || !strings.HasPrefix(node, "cpu-") && !strings.HasPrefix(node, "system-") {
				t.Errorf("%s lost with cpu-0: replaced on %q (pending: %q)", lost, node, pending[o])
			}
		}
	}
	t.Logf("lost %v; replaced %+v", rep.Failure.Lost, rep.Failure.Replaced)
	if lostVLLM != 4 || lostCPU == 0 {
		t.Errorf("lost %d vLLM pods (want 4) and %d others (want some): %v", lostVLLM, lostCPU, rep.Failure.Lost)
	}
	for _, p := range rep.Pools {
		if p.Pool == "gpu" && p.GPUs != 2 {
			t.Errorf("the GPU pool after the failure: %d GPUs, want the 2 T4 cards", p.GPUs)
		}
	}
}

// Nodes take their pool's zones in turn: the NodePool's zone requirement, else DefaultZones.
func TestNodesSpreadOverZones(t *testing.T) {
	pool := &unstructured.Unstructured{Object: map[string]any{"kind": "NodePool", "metadata": map[string]any{"name": "cpu"},
		"spec": map[string]any{
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"platform.llm/pool": "cpu"}},
				"spec": map[string]any{"requirements": []any{map[string]any{"key": ZoneLabel, "operator": "In", "values": []any{"eu-1a", "eu-1b"}}}}},
			"limits": map[string]any{"cpu": "64"}}}}
	zonesOf := func(ns []*corev1.Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Labels[ZoneLabel])
		}
		return out
	}
	if got := zonesOf(Nodes(GroupsFromNodePools([]*unstructured.Unstructured{pool}))); !slices.Equal(got, []string{"eu-1a", "eu-1b", "eu-1a", "eu-1b"}) {
		t.Errorf("zones of a NodePool in eu-1a and eu-1b: %v", got)
	}
	if got := zonesOf(Nodes(gpuGroups(map[string]int{"t4": 4}))[5:]); !slices.Equal(got, []string{"zone-a", "zone-b", "zone-c", "zone-a"}) {
		t.Errorf("zones of a group that names none: %v", got)
	}
}

// A zone taken away takes every node in it: prod's pods there are lost, and their replacements
// go to the other zones' nodes or wait.
func TestFailedZoneMovesItsPods(t *testing.T) {
	c := cluster(t)
	objs := prod(t)
	groups := GroupsFromNodePools(objs)
	var inZone []string // computed from the node model, not from the run
	for _, n := range Nodes(groups) {
		if n.Labels[ZoneLabel] == "zone-a" {
			inZone = append(inZone, n.Name)
		}
	}
	if _, err := Run(context.Background(), c.Config, objs, Options{Env: "prod", Groups: groups, FailZones: []string{"zone-x"}}); err == nil ||
		!strings.Contains(err.Error(), "--fail-zone zone-x: no node is in it (the zones: zone-a, zone-b, zone-c)") {
		t.Fatalf("an unknown zone: %v", err)
	}
	rep, err := Run(context.Background(), c.Config, objs, Options{Env: "prod", Groups: groups, RunCronJobs: true, FailZones: []string{"zone-a"}})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Failure
	if f == nil || !slices.Equal(f.Zones, []string{"zone-a"}) || !slices.Equal(slices.Sorted(slices.Values(f.Nodes)), slices.Sorted(slices.Values(inZone))) {
		t.Fatalf("failure %+v, want the nodes of zone-a %v", f, inZone)
	}
	if len(f.Lost) == 0 {
		t.Fatal("no pod lost with a third of the nodes")
	}
	for _, p := range f.Replaced {
		if slices.Contains(inZone, p.Node) {
			t.Errorf("%s replaced on %s, a node of the failed zone", p.Pod, p.Node)
		}
	}
	left := map[string]int{} // nodes of each pool outside zone-a
	for _, n := range Nodes(groups) {
		if !slices.Contains(inZone, n.Name) {
			left[n.Labels["platform.llm/pool"]]++
		}
	}
	for _, p := range rep.Pools {
		if p.Nodes != left[p.Pool] {
			t.Errorf("pool %s after the failure: %d nodes, want %d", p.Pool, p.Nodes, left[p.Pool])
		}
	}
	t.Logf("zone-a: %v; lost %v; replaced %+v; pending %+v", inZone, f.Lost, f.Replaced, rep.Pending)
}

// At a traffic peak (qwen at 9 replicas) with zone-a gone, prod's vLLM pods want one GPU more than
// the zones left hold: exactly that many vLLM pods wait, whatever the night jobs held (they run at
// a lower priority and are preempted).
func TestScaledToAPeakAfterAZoneFails(t *testing.T) {
	c := cluster(t)
	objs := prod(t)
	groups := GroupsFromNodePools(objs)
	gpusLeft := 0
	for _, n := range Nodes(groups) {
		if g := n.Status.Allocatable["nvidia.com/gpu"]; n.Labels[ZoneLabel] != "zone-a" {
			gpusLeft += int(g.Value())
		}
	}
	vllm := map[string]int{"vllm-qwen": 9}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && strings.HasPrefix(o.GetName(), "vllm-") && vllm[o.GetName()] == 0 {
			r, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			vllm[o.GetName()] = int(r)
		}
	}
	wanted := 0
	for _, n := range vllm {
		wanted += n // one GPU each (the render tests hold it)
	}
	rep, err := Run(context.Background(), c.Config, objs, Options{Env: "prod", Groups: groups, RunCronJobs: true, FailZones: []string{"zone-a"},
		Scale: map[string]Scaled{"llm-inference/vllm-qwen": {Replicas: 9, Why: "a test's peak"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scaled) != 1 || rep.Scaled[0].Deployment != "llm-inference/vllm-qwen" || rep.Scaled[0].Placed+rep.Scaled[0].Pending != 9 {
		t.Fatalf("scaled: %+v", rep.Scaled)
	}
	pending := 0
	for _, p := range rep.Pending {
		if strings.HasPrefix(p.Pod, "llm-inference/vllm-") {
			pending++
		}
	}
	if want := max(0, wanted-gpusLeft); pending != want {
		t.Errorf("%d vLLM pods pending, want %d (%d wanted on %d GPUs left): %+v", pending, want, wanted, gpusLeft, rep.Pending)
	}
	t.Logf("vLLM %v on %d GPUs left; scaled %+v; pending %+v; preempted %v", vllm, gpusLeft, rep.Scaled, rep.Pending, rep.Preempted)
}
