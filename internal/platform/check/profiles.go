package check

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/cost"
	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// trafficProfiles reads the env's measured traffic profiles (clusters/<env>/profiles/*.yaml, by
// `auditor profile`) and holds Git's settings against them (rule traffic-profile):
//   - a file that does not parse, or names a model no Deployment with a ScaledObject serves,
//     is a violation;
//   - a queue threshold other than the one the profile asks for, and a peak of the profile the
//     schedule lacks or holds with too few replicas, are warnings: the profile is of the past,
//     and a setting can differ on purpose, but a reviewer should see it.
//
// It returns each profile's p95 lengths by Deployment name, which size --max-num-seqs.
func trafficProfiles(snap *gitrepo.Snapshot, env string, objs []*unstructured.Unstructured) (measured map[string]capacity.Traffic, violations, warnings []Violation) {
	dir := path.Dir(profile.Path(env, "x"))
	var files []string
	for name := range snap.Files {
		if path.Dir(name) == dir && strings.HasSuffix(name, ".yaml") {
			files = append(files, name)
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, nil, nil
	}
	sched, err := schedule.Load(snap, env)
	if err != nil && !errors.Is(err, schedule.ErrNoSchedule) {
		sched = nil // the schedule rule reports it
	}
	measured = map[string]capacity.Traffic{}
	atPeak := map[string]peakLoad{} // Deployment name → replicas at its profile's peak
	for _, file := range files {
		add := func(to *[]Violation, format string, a ...any) {
			*to = append(*to, Violation{Rule: "traffic-profile", Object: file, Message: fmt.Sprintf(format, a...)})
		}
		p, err := profile.Parse(file, snap.Files[file])
		if err != nil {
			add(&violations, "%v", err)
			continue
		}
		prop, wl, err := profile.ProposeFrom(p, objs, sched)
		if err != nil {
			add(&violations, "%v", err)
			continue
		}
		measured[wl.Deployment.GetNamespace()+"/"+wl.Deployment.GetName()] = capacity.Traffic{
			PromptTokens:   int64(math.Ceil(p.Tokens.Prompt.P95)),
			ResponseTokens: int64(math.Ceil(p.Tokens.Response.P95)),
		}
		settings := wl.Settings()
		loc, _ := p.Location() // Parse checked it
		window := fmt.Sprintf("the profile of %s to %s", p.From.In(loc).Format("2006-01-02"), p.To.In(loc).Format("2006-01-02"))
		if prop.PerReplica == 0 {
			add(&warnings, "%s: %s; the threshold, the schedule and the GPU pool are not held against it", window, strings.Join(prop.Notes, "; "))
			continue
		}
		if prop.Threshold.Proposed != settings.Threshold {
			add(&warnings, "ScaledObject %s waits for %s queued requests per replica; %s asks for %s: %s",
				settings.ScaledObject, gnum(settings.Threshold), window, gnum(prop.Threshold.Proposed), prop.Threshold.Arithmetic)
		}
		load := peakLoad{file: file}
		load.replicas, load.what = prop.PeakReplicas()
		supported := map[string]bool{}
		for _, pk := range prop.Peaks {
			supported[pk.CoveredBy] = true
			switch pk.Action {
			case profile.Add:
				add(&warnings, "%s found peak %s (%s at %s for %s, warm %d: %s), which %s lacks; `auditor profile --env %s --model %s --write` adds it",
					window, pk.Name, pk.When(), pk.At, pk.Duration, pk.Warm, pk.Arithmetic, schedule.Path(env), env, p.Model)
			case profile.Raise:
				add(&warnings, "%s found peak %s, which schedule peak %s holds with fewer replicas than the %d it needs: %s",
					window, pk.Name, pk.CoveredBy, pk.Warm, pk.Arithmetic)
			}
		}
		if sched != nil {
			_, soName, _ := strings.Cut(settings.ScaledObject, "/")
			for _, sp := range sched.Peaks {
				// Only a peak that happened in the window can be missing from it.
				if sp.Target.Kind == "ScaledObject" && sp.Target.Name == soName && !supported[sp.Name] && len(sp.Starts(p.From, p.To.Add(-sp.Duration))) > 0 {
					add(&warnings, "schedule peak %s raises ScaledObject %s to %d, but %s found no peak it holds: the traffic it was written for may be gone",
						sp.Name, settings.ScaledObject, sp.Warm, window)
				}
			}
		}
		if load.replicas > 0 {
			atPeak[wl.Deployment.GetNamespace()+"/"+wl.Deployment.GetName()] = load
		}
	}
	violations = append(violations, gpuPoolNPlusOne(objs, atPeak)...)
	return measured, violations, warnings
}

// peakLoad is the replicas a profiled Deployment (by namespace/name) runs at its profile's peak.
type peakLoad struct {
	replicas   int64
	what, file string
}

// gpuPoolNPlusOne checks that the GPU pool survives the loss of its largest node at the
// profiles' peak (rule gpu-pool-n-plus-one): the nodes the Deployments hold then (a profiled one
// at its peak's replicas, every other at its minimum; GPUs packed onto the largest nodes) plus one
// more largest node fit the NodePool's nvidia.com/gpu limit, which Karpenter counts in whole
// nodes' capacity, so that it can launch the replacement while the lost node's claim still counts
// against the limit. The largest node is the NodePool's highest karpenter.k8s.aws/instance-gpu-count,
// one GPU when it states none. Like capacity-gpu-pool-limit it takes every GPU workload to the
// GPU pool. The night's batch jobs are left out: the profiles' peaks are by day.
func gpuPoolNPlusOne(objs []*unstructured.Unstructured, atPeak map[string]peakLoad) []Violation {
	if len(atPeak) == 0 {
		return nil
	}
	minOf := map[string]int64{}
	for _, o := range objs {
		target, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name")
		switch o.GetKind() {
		case "ScaledObject":
			m, ok, _ := unstructured.NestedInt64(o.Object, "spec", "minReplicaCount")
			if !ok {
				m = 0 // KEDA's default
			}
			minOf[o.GetNamespace()+"/"+target] = m
		case "HorizontalPodAutoscaler":
			m, ok, _ := unstructured.NestedInt64(o.Object, "spec", "minReplicas")
			if !ok {
				m = 1
			}
			minOf[o.GetNamespace()+"/"+target] = m
		}
	}
	var out []Violation
	for _, pool := range objs {
		if pool.GetKind() != "NodePool" {
			continue
		}
		v, ok, _ := unstructured.NestedFieldNoCopy(pool.Object, "spec", "limits", "nvidia.com/gpu")
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(fmt.Sprint(v))
		if err != nil {
			continue
		}
		limit, largest := q.Value(), largestNodeGPUs(pool)
		var held int64
		var pods []int64 // the GPUs of each pod, to pack onto nodes
		var parts, files []string
		for _, o := range objs {
			if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
				continue
			}
			pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			gpus := cost.GPUs(pod)
			if gpus == 0 {
				continue
			}
			n, why := int64(1), "replicas"
			if r, ok, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); ok {
				n = r
			}
			if m, ok := minOf[o.GetNamespace()+"/"+o.GetName()]; ok {
				n, why = m, "minimum"
			}
			if l, ok := atPeak[o.GetNamespace()+"/"+o.GetName()]; ok {
				n, why = l.replicas, l.what
				files = append(files, l.file)
			}
			held += n * gpus
			for range n {
				pods = append(pods, gpus)
			}
			parts = append(parts, fmt.Sprintf("%s %d×%d (%s)", o.GetName(), n, gpus, why))
		}
		nodes := packedNodes(pods, largest) + 1 // the nodes held, and one to replace a lost one
		if need := nodes * largest; need > limit {
			short := (need - limit + largest - 1) / largest
			out = append(out, Violation{Rule: "gpu-pool-n-plus-one", Object: "NodePool " + pool.GetName(), Message: fmt.Sprintf(
				"at the peak of %s the GPU workloads hold %d GPUs (%s): %d nodes of %d GPUs, and one more to replace a lost one, is %d GPUs, above the limit of %d: %d GPU node(s) short",
				strings.Join(files, ", "), held, strings.Join(parts, " + "), nodes-1, largest, need, limit, short)})
		}
	}
	return out
}

// packedNodes is how many nodes of size GPUs the pods take, placed first-fit from the largest
// pod: a pod cannot be split across nodes, so 2-GPU pods on 3-GPU nodes take a node each.
func packedNodes(pods []int64, size int64) int64 {
	sorted := slices.Sorted(slices.Values(pods))
	slices.Reverse(sorted)
	var free []int64
	for _, g := range sorted {
		placed := false
		for i := range free {
			if free[i] >= g {
				free[i] -= g
				placed = true
				break
			}
		}
		if !placed {
			free = append(free, size-min(g, size))
		}
	}
	return int64(len(free))
}

// largestNodeGPUs is the most GPUs a node of pool has: the highest value of its requirement
// karpenter.k8s.aws/instance-gpu-count (In), else 1.
func largestNodeGPUs(pool *unstructured.Unstructured) int64 {
	reqs, _, _ := unstructured.NestedSlice(pool.Object, "spec", "template", "spec", "requirements")
	var most int64
	for _, r := range reqs {
		m, _ := r.(map[string]any)
		if m["key"] != "karpenter.k8s.aws/instance-gpu-count" || m["operator"] != "In" {
			continue
		}
		vals, _ := m["values"].([]any)
		for _, v := range vals {
			if n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64); err == nil && n > most {
				most = n
			}
		}
	}
	return max(most, 1)
}

func gnum(v float64) string { return fmt.Sprintf("%g", v) }
