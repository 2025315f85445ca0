package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

// Report is the placement the scheduler chose.
type Report struct {
	Env        string       `json:"env"`
	Pools      []PoolReport `json:"pools"`
	Pending    []Pending    `json:"pending"`
	Preempted  []string     `json:"preempted"`
	Violations []Violation  `json:"violations"`
	// Failure is what became of the pods of the nodes Options.FailNodes took away; nil without.
	Failure *Failure `json:"failure,omitempty"`
	// Scaled says, for each Deployment Options.Scale set, how many of its pods the scheduler
	// placed in the end.
	Scaled []Scaled `json:"scaled,omitempty"`
}

// Scaled is a Deployment run at a set replica count, and what became of its pods.
type Scaled struct {
	Deployment string `json:"deployment"`
	Replicas   int64  `json:"replicas"`
	// Why says where the count comes from (e.g. a traffic profile's peak).
	Why     string `json:"why,omitempty"`
	Placed  int    `json:"placed"`
	Pending int    `json:"pending"`
}

// Failure is a node failure played after the first placement settled: the nodes went, their
// pods with them, and the controllers and the scheduler did the rest.
type Failure struct {
	// Zones are the zones taken away (--fail-zone); Nodes every node taken away.
	Zones []string `json:"zones,omitempty"`
	Nodes []string `json:"nodes"`
	// Lost are the pods that ran on them, node agents (DaemonSets' pods) aside.
	Lost []string `json:"lost"`
	// Replaced are the pods the controllers made since, where the scheduler put them (Pending
	// in the report's pending when it put them nowhere).
	Replaced []Placement `json:"replaced"`
}

// Placement is a pod and its node.
type Placement struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// PoolReport sums one pool.
type PoolReport struct {
	Pool     string   `json:"pool"`
	Nodes    int      `json:"nodes"`
	Pods     []string `json:"pods"`
	GPUs     int64    `json:"gpus"`
	GPUsUsed int64    `json:"gpusUsed"`
}

// Pending is a pod the scheduler could not place, with its reason.
type Pending struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Violation is a pod in the wrong place.
type Violation struct {
	Rule    string `json:"rule"`
	Pod     string `json:"pod"`
	Node    string `json:"node"`
	Message string `json:"message"`
}

// Options tune a simulation.
type Options struct {
	Env string
	// Groups model the nodes; GroupsFromNodePools(objs) when nil.
	Groups []NodeGroup
	// Settle is how long placement must stay unchanged to be final (default 3s); Timeout bounds it all.
	Settle, Timeout time.Duration
	// RunCronJobs starts one Job from every CronJob, as if all fired now (default true via Run).
	RunCronJobs bool
	// FailNodes are taken away once the placement settled, as a cloud takes a failed node: the
	// Node goes, and its pods with it (the pod garbage collector's part). The placement settles
	// again, and the report is of that.
	FailNodes []string
	// FailZones take away every node of each zone (label topology.kubernetes.io/zone), as
	// FailNodes does.
	FailZones []string
	// Scale runs Deployments at other replica counts than Git's: "namespace/name" → replicas and
	// why (e.g. a traffic profile's peak), since no autoscaler runs here.
	Scale map[string]Scaled
}

// Run applies objs to the cluster behind cfg (which must run kube-scheduler and
// kube-controller-manager), waits for placement to settle, and reports it.
func Run(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, opts Options) (*Report, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	if opts.Groups == nil {
		opts.Groups = GroupsFromNodePools(objs)
	}
	if opts.Settle == 0 {
		opts.Settle = 3 * time.Second
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	objs = scaled(objs, opts.Scale)
	ns := Nodes(opts.Groups)
	if opts.FailNodes, err = withZones(opts.FailNodes, opts.FailZones, ns); err != nil {
		return nil, err
	}
	for _, n := range ns {
		if err := createNode(ctx, cs, n); err != nil {
			return nil, err
		}
	}
	if err := createVolumes(ctx, cs, objs); err != nil {
		return nil, err
	}
	syncer, err := localcluster.NewSyncer(cfg)
	if err != nil {
		return nil, err
	}
	if err := syncer.Sync(ctx, "simulate-"+opts.Env, objs, false); err != nil {
		return nil, err
	}
	if opts.RunCronJobs {
		if err := fireCronJobs(ctx, cs, objs); err != nil {
			return nil, err
		}
	}
	preempted, err := settle(ctx, cs, opts)
	if err != nil {
		return nil, err
	}
	if len(opts.FailNodes) == 0 && len(opts.FailZones) == 0 {
		rep, err := report(ctx, cs, objs, opts, ns, preempted)
		if err != nil {
			return nil, err
		}
		return rep, scaledFit(ctx, cs, objs, opts.Scale, rep)
	}
	failure, err := failNodes(ctx, cs, opts.FailNodes, ns)
	if err != nil {
		return nil, err
	}
	before := failure.uids
	more, err := settle(ctx, cs, opts)
	if err != nil {
		return nil, err
	}
	var left []*corev1.Node
	for _, n := range ns {
		if !slices.Contains(opts.FailNodes, n.Name) {
			left = append(left, n)
		}
	}
	rep, err := report(ctx, cs, objs, opts, left, slices.Compact(slices.Sorted(slices.Values(append(preempted, more...)))))
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	rep.Failure = &failure.Failure
	rep.Failure.Zones = opts.FailZones
	for _, p := range pods.Items {
		if !before[p.UID] && p.Spec.NodeName != "" {
			rep.Failure.Replaced = append(rep.Failure.Replaced, Placement{Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName})
		}
	}
	sort.Slice(rep.Failure.Replaced, func(i, j int) bool { return rep.Failure.Replaced[i].Pod < rep.Failure.Replaced[j].Pod })
	return rep, scaledFit(ctx, cs, objs, opts.Scale, rep)
}

// scaled copies objs with the Deployments of scale at their replica counts.
func scaled(objs []*unstructured.Unstructured, scale map[string]Scaled) []*unstructured.Unstructured {
	if len(scale) == 0 {
		return objs
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o
		if s, ok := scale[o.GetNamespace()+"/"+o.GetName()]; ok && o.GetKind() == "Deployment" {
			out[i] = o.DeepCopy()
			_ = unstructured.SetNestedField(out[i].Object, s.Replicas, "spec", "replicas")
		}
	}
	return out
}

// scaledFit counts, for each scaled Deployment, its pods placed and pending (by its selector).
func scaledFit(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured, scale map[string]Scaled, rep *Report) error {
	for _, o := range objs {
		s, ok := scale[o.GetNamespace()+"/"+o.GetName()]
		if !ok || o.GetKind() != "Deployment" {
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		pods, err := cs.CoreV1().Pods(o.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			return fmt.Errorf("list pods of %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		s.Deployment = o.GetNamespace() + "/" + o.GetName()
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				s.Placed++
			} else {
				s.Pending++
			}
		}
		rep.Scaled = append(rep.Scaled, s)
	}
	sort.Slice(rep.Scaled, func(i, j int) bool { return rep.Scaled[i].Deployment < rep.Scaled[j].Deployment })
	return nil
}

// withZones adds the nodes of zones to names, once each; a zone no node is in is an error.
func withZones(names, zones []string, ns []*corev1.Node) ([]string, error) {
	out := slices.Clone(names)
	for _, z := range zones {
		found := false
		for _, n := range ns {
			if n.Labels[ZoneLabel] == z {
				found = true
				if !slices.Contains(out, n.Name) {
					out = append(out, n.Name)
				}
			}
		}
		if !found {
			var all []string
			for _, n := range ns {
				all = append(all, n.Labels[ZoneLabel])
			}
			return nil, fmt.Errorf("--fail-zone %s: no node is in it (the zones: %s)", z, strings.Join(slices.Compact(slices.Sorted(slices.Values(all))), ", "))
		}
	}
	return out, nil
}

// failed is a Failure in the making, with the pods there were before it (by UID).
type failed struct {
	Failure
	uids map[types.UID]bool
}

// failNodes takes nodes away: each Node is deleted, and the pods bound to it are deleted at once
// (what the pod garbage collector does to the pods of a Node that is gone).
func failNodes(ctx context.Context, cs kubernetes.Interface, names []string, ns []*corev1.Node) (*failed, error) {
	for _, name := range names {
		if !slices.ContainsFunc(ns, func(n *corev1.Node) bool { return n.Name == name }) {
			var all []string
			for _, n := range ns {
				all = append(all, n.Name)
			}
			return nil, fmt.Errorf("--fail-node %s: no such node (the nodes: %s)", name, strings.Join(all, ", "))
		}
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := &failed{Failure: Failure{Nodes: slices.Clone(names), Lost: []string{}, Replaced: []Placement{}}, uids: map[types.UID]bool{}}
	for _, p := range pods.Items {
		out.uids[p.UID] = true
	}
	for _, name := range names {
		if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("fail node %s: %w", name, err)
		}
	}
	zero := int64(0)
	for _, p := range pods.Items {
		if !slices.Contains(names, p.Spec.NodeName) {
			continue
		}
		if !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
			out.Lost = append(out.Lost, p.Namespace+"/"+p.Name) // a node agent goes with its node: nothing is lost
		}
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %s/%s of failed node %s: %w", p.Namespace, p.Name, p.Spec.NodeName, err)
		}
	}
	sort.Strings(out.Lost)
	return out, nil
}

func createNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	status, taints := n.Status, n.Spec.Taints
	got, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	got.Status = status
	got, err = cs.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("mark node %s ready: %w", n.Name, err)
	}
	// The API server taints every new node not-ready; the node lifecycle controller would lift it
	// once the kubelet reports Ready. Neither runs here, so the simulated kubelet lifts it.
	got.Spec.Taints = taints
	if _, err := cs.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("untaint node %s: %w", n.Name, err)
	}
	return nil
}

// createVolumes pre-binds a PersistentVolume to every claim the objects make (PVCs and
// StatefulSet volumeClaimTemplates), since no storage provisioner runs.
func createVolumes(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	type claim struct {
		ns, name string
		spec     map[string]any
	}
	var claims []claim
	for _, o := range objs {
		switch o.GetKind() {
		case "PersistentVolumeClaim":
			spec, _, _ := unstructured.NestedMap(o.Object, "spec")
			claims = append(claims, claim{o.GetNamespace(), o.GetName(), spec})
		case "StatefulSet":
			replicas, ok, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			if !ok {
				replicas = 1
			}
			tpls, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
			for _, t := range tpls {
				tm := t.(map[string]any)
				name, _, _ := unstructured.NestedString(tm, "metadata", "name")
				spec, _, _ := unstructured.NestedMap(tm, "spec")
				for i := range replicas {
					claims = append(claims, claim{o.GetNamespace(), fmt.Sprintf("%s-%s-%d", name, o.GetName(), i), spec})
				}
			}
		}
	}
	for _, c := range claims {
		var spec corev1.PersistentVolumeClaimSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.spec, &spec); err != nil {
			return fmt.Errorf("claim %s/%s: %w", c.ns, c.name, err)
		}
		size := spec.Resources.Requests[corev1.ResourceStorage]
		if size.IsZero() {
			size = resource.MustParse("1Gi")
		}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "sim-" + c.ns + "-" + c.name}, Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: spec.AccessModes,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/simulated/" + c.ns + "/" + c.name}},
			ClaimRef:               &corev1.ObjectReference{Namespace: c.ns, Name: c.name},
		}}
		if spec.StorageClassName != nil {
			pv.Spec.StorageClassName = *spec.StorageClassName
		}
		if len(pv.Spec.AccessModes) == 0 {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create volume for %s/%s: %w", c.ns, c.name, err)
		}
	}
	return nil
}

// fireCronJobs creates one Job from each CronJob's template, as `kubectl create job --from` does.
func fireCronJobs(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "CronJob" {
			continue
		}
		tpl, _, _ := unstructured.NestedMap(o.Object, "spec", "jobTemplate")
		var jt batchv1.JobTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tpl, &jt); err != nil {
			return fmt.Errorf("cronjob %s: %w", o.GetName(), err)
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: o.GetName() + "-sim", Namespace: o.GetNamespace(), Labels: jt.Labels}, Spec: jt.Spec}
		if _, err := cs.BatchV1().Jobs(o.GetNamespace()).Create(ctx, job, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("job from cronjob %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// settle plays the kubelet's part in pod deletion (a preempted pod fails and is removed at once) and waits
// until no pod changes node or state for opts.Settle. It returns the preempted pods.
func settle(ctx context.Context, cs kubernetes.Interface, opts Options) ([]string, error) {
	deadline := time.Now().Add(opts.Timeout)
	preempted := map[string]bool{}
	last, stableSince := "", time.Now()
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		var state []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				if p.Spec.NodeName != "" {
					preempted[p.Namespace+"/"+p.Name] = true
				}
				// The kubelet moves a pod it killed to a terminal phase before it goes: a Job with a
				// podFailurePolicy counts (or ignores) the pod, and lifts its tracking finalizer, only then.
				if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
					failed := p.DeepCopy()
					failed.Status.Phase = corev1.PodFailed
					_, _ = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, failed, metav1.UpdateOptions{})
				}
				zero := int64(0)
				_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				continue
			}
			state = append(state, p.Namespace+"/"+p.Name+"@"+p.Spec.NodeName+":"+scheduledReason(&p))
		}
		sort.Strings(state)
		cur := strings.Join(state, ",")
		if cur != last {
			last, stableSince = cur, time.Now()
		} else if len(state) > 0 && time.Since(stableSince) >= opts.Settle {
			out := make([]string, 0, len(preempted))
			for p := range preempted {
				out = append(out, p)
			}
			sort.Strings(out)
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("placement did not settle within %s", opts.Timeout)
}

func scheduledReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}
