package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

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
	opts = withDefaults(opts, objs)
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
	left := remaining(ns, opts.FailNodes)
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

// withDefaults fills what opts leaves unset: the node groups from objs' node pools, a settle
// time of 3 s and a timeout of 2 minutes.
func withDefaults(opts Options, objs []*unstructured.Unstructured) Options {
	if opts.Groups == nil {
		opts.Groups = GroupsFromNodePools(objs)
	}
	if opts.Settle == 0 {
		opts.Settle = 3 * time.Second
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	return opts
}

// remaining is the nodes of ns not named in failed.
func remaining(ns []*corev1.Node, failed []string) []*corev1.Node {
	var left []*corev1.Node
	for _, n := range ns {
		if !slices.Contains(failed, n.Name) {
			left = append(left, n)
		}
	}
	return left
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
