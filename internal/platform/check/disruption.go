package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/platform/cost"
	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Business hours: when inference must keep its GPU nodes, weekdays 09:00-18:00 in the platform's
// time zone, Europe/Moscow (the schedule's peaks and the batch CronJobs use it), which has been
// UTC+3 all year since 2014. Karpenter's budget schedules are UTC.
var (
	businessZone               = time.FixedZone("Europe/Moscow", 3*3600)
	businessStart, businessEnd = 9, 18
)

// gpuDisruptionBudget checks that GPU capacity stays in business hours:
//   - every GPU NodePool has a budget of 0 nodes whose schedule and duration cover business hours
//     on every weekday, for the reasons its consolidation can give (Empty, Drifted, and
//     Underutilized when it consolidates underutilized nodes; no reasons = all);
//   - and an always-active budget below 100% for the rest of the time;
//   - and expireAfter Never: expiration is forceful, Karpenter deletes an expired NodeClaim
//     whatever the budgets say (sigs.k8s.io/karpenter v1.15.0, nodeclaim/expiration);
//   - every GPU Deployment that keeps a replica (minimum >= 1) has a PodDisruptionBudget, which
//     with two or more replicas at the minimum never lets them all go at once.
func gpuDisruptionBudget(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, pool := range gpuNodePools(objs) {
		out = append(out, poolBudgets(pool)...)
	}
	out = append(out, gpuPDBs(objs)...)
	return sortViolations(out)
}

func poolBudgets(pool *unstructured.Unstructured) []Violation {
	var out []Violation
	bad := func(msg string) {
		out = append(out, Violation{Rule: "gpu-disruption-budget", Object: id(pool), Message: id(pool) + ": " + msg})
	}
	policy, _, _ := unstructured.NestedString(pool.Object, "spec", "disruption", "consolidationPolicy")
	need := []string{"Empty", "Drifted"}
	if policy != "WhenEmpty" {
		need = append(need, "Underutilized")
	}
	budgets, found, _ := unstructured.NestedSlice(pool.Object, "spec", "disruption", "budgets")
	if !found {
		budgets = []any{map[string]any{"nodes": "10%"}} // the CRD's default
	}
	var windows [][2]time.Time
	bounded := false
	for _, b := range budgets {
		bm := asMap(b)
		nodes, _, _ := unstructured.NestedString(bm, "nodes")
		schedule, _, _ := unstructured.NestedString(bm, "schedule")
		if schedule == "" {
			if nodes != "100%" {
				bounded = true
			}
			continue
		}
		if !zeroNodes(nodes) || !coversReasons(bm, need) {
			continue
		}
		dur, _, _ := unstructured.NestedString(bm, "duration")
		w, err := activeWindows(schedule, dur)
		if err != nil {
			bad(err.Error())
			continue
		}
		windows = append(windows, w...)
	}
	if gap, ok := uncovered(windows); ok {
		bad(fmt.Sprintf("no budget of 0 nodes for reasons %s covers business hours (weekdays %02d:00-%02d:00 Europe/Moscow; first gap %s): Karpenter may remove a GPU node, and the replica on it, in business hours; add {nodes: \"0\", schedule: <UTC cron>, duration: ..., reasons: [%s]}",
			strings.Join(need, ", "), businessStart, businessEnd, gap.In(businessZone).Format("Mon 15:04 MST"), strings.Join(need, ", ")))
	}
	if !bounded {
		bad("no always-active budget below 100%: outside its scheduled budgets Karpenter may disrupt every GPU node at once; add {nodes: \"1\"}")
	}
	if exp, ok, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "expireAfter"); !ok || exp != "Never" {
		if !ok {
			exp = "720h (the default)"
		}
		bad("expireAfter " + exp + ": expiration is forceful, Karpenter deletes expired GPU nodes whatever the budgets say, in business hours too; set expireAfter: Never and replace nodes by drift (a node class change), which the budgets pace")
	}
	return out
}

func zeroNodes(nodes string) bool {
	return nodes == "0" || nodes == "0%"
}

// coversReasons reports whether a budget applies to every reason in need (no reasons = all).
func coversReasons(b map[string]any, need []string) bool {
	reasons, found, _ := unstructured.NestedStringSlice(b, "reasons")
	if !found || len(reasons) == 0 {
		return true
	}
	have := map[string]bool{}
	for _, r := range reasons {
		have[r] = true
	}
	for _, r := range need {
		if !have[r] {
			return false
		}
	}
	return true
}

// referenceWeek is the Monday 00:00 of the week business hours are checked on (any week does:
// Karpenter's schedules are plain cron, with no dates beyond the week).
var referenceWeek = time.Date(2026, 11, 30, 0, 0, 0, 0, businessZone)

// activeWindows returns when a budget with this UTC cron schedule and duration is active in the
// reference week (activations from the day before, which may reach into Monday).
func activeWindows(schedule, duration string) ([][2]time.Time, error) {
	sched, err := cron.ParseStandard(schedule)
	if err != nil {
		return nil, fmt.Errorf("budget schedule %q: %w", schedule, err)
	}
	d, err := time.ParseDuration(duration)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("budget schedule %q: duration %q: want a positive duration", schedule, duration)
	}
	var out [][2]time.Time
	end := referenceWeek.AddDate(0, 0, 7)
	for t := sched.Next(referenceWeek.AddDate(0, 0, -1).UTC().Add(-time.Second)); t.Before(end); t = sched.Next(t) {
		out = append(out, [2]time.Time{t, t.Add(d)})
	}
	return out, nil
}

// uncovered returns the first quarter hour of business hours in the reference week that no
// window covers.
func uncovered(windows [][2]time.Time) (time.Time, bool) {
	for day := 0; day < 5; day++ {
		start := referenceWeek.AddDate(0, 0, day).Add(time.Duration(businessStart) * time.Hour)
		end := referenceWeek.AddDate(0, 0, day).Add(time.Duration(businessEnd) * time.Hour)
		for t := start; t.Before(end); t = t.Add(15 * time.Minute) {
			covered := false
			for _, w := range windows {
				if !t.Before(w[0]) && t.Add(15*time.Minute).Compare(w[1]) <= 0 {
					covered = true
					break
				}
			}
			if !covered {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// gpuPDBs checks that each GPU Deployment keeping at least one replica has a PodDisruptionBudget,
// and that with two or more replicas at its minimum the budget keeps one: a drain must not take a
// model's every replica at once. With one replica the budget must let it go (drain-possible): the
// GPU pool's business-hours budget, not the PDB, keeps that replica through the day.
func gpuPDBs(objs []*unstructured.Unstructured) []Violation {
	mins := minimumScales(objs)
	var pdbs []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "PodDisruptionBudget" {
			pdbs = append(pdbs, o)
		}
	}
	var out []Violation
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		pod := podTemplate(o)
		if pod == nil || cost.GPUs(pod) == 0 {
			continue
		}
		minR := workloadMinimum(o, mins)
		if minR < 1 {
			continue // scales to zero: nothing to keep
		}
		podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		var pdb *unstructured.Unstructured
		for _, p := range pdbs {
			if p.GetNamespace() == o.GetNamespace() && selects(p, podLabels) {
				pdb = p
				break
			}
		}
		if pdb == nil {
			out = append(out, Violation{Rule: "gpu-disruption-budget", Object: id(o), Message: fmt.Sprintf(
				"%s (at least %d replica(s)) has no PodDisruptionBudget: a node drain evicts its replicas at once; add one with maxUnavailable: 1", id(o), minR)})
			continue
		}
		if allowed, how := disruptionsAllowed(pdb, minR); minR >= 2 && allowed >= minR {
			out = append(out, Violation{Rule: "gpu-disruption-budget", Object: id(pdb), Message: fmt.Sprintf(
				"%s lets every replica of %s (minimum %d) be evicted at once: %s; use maxUnavailable: 1", id(pdb), id(o), minR, how)})
		}
	}
	return out
}

// selects reports whether a PodDisruptionBudget's selector selects pods with these labels.
func selects(pdb *unstructured.Unstructured, podLabels map[string]string) bool {
	raw, found, _ := unstructured.NestedMap(pdb.Object, "spec", "selector")
	if !found {
		return false
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || sel.Empty() {
		return false
	}
	return sel.Matches(labels.Set(podLabels))
}

// GPUPool is what a GPU NodePool gives its nodes and when it lets them go.
type GPUPool struct {
	Pool string `json:"pool"`
	// NodeClass is the EC2NodeClass, "(not rendered)" appended when the env lacks it.
	NodeClass string `json:"nodeClass"`
	// RootVolume is the node class's root volume size ("" when none).
	RootVolume string `json:"rootVolume,omitempty"`
	// AMI is the AMI selector: an alias or an id ("" when neither).
	AMI string `json:"ami,omitempty"`
	// Budgets lists the disruption budgets as Karpenter reads them (schedules in UTC).
	Budgets     []string `json:"budgets"`
	ExpireAfter string   `json:"expireAfter"`
}

// gpuPoolPosture describes each GPU NodePool of an env (the check's GPU section).
func gpuPoolPosture(objs []*unstructured.Unstructured) []GPUPool {
	classes := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GroupVersionKind().Group == "karpenter.k8s.aws" && o.GetKind() == "EC2NodeClass" {
			classes[o.GetName()] = o
		}
	}
	var out []GPUPool
	for _, pool := range gpuNodePools(objs) {
		p := GPUPool{Pool: pool.GetName(), Budgets: []string{}}
		name, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "nodeClassRef", "name")
		p.NodeClass = name
		if class, ok := classes[name]; ok {
			alias, family := amiAlias(class)
			p.AMI = alias
			if alias == "" && amiByID(class) {
				terms, _, _ := unstructured.NestedSlice(class.Object, "spec", "amiSelectorTerms")
				p.AMI, _, _ = unstructured.NestedString(asMap(terms[0]), "id")
			}
			if size, device, found := rootVolume(class, family); found {
				p.RootVolume = size.String() + " on " + device
			}
		} else {
			p.NodeClass += " (not rendered)"
		}
		budgets, _, _ := unstructured.NestedSlice(pool.Object, "spec", "disruption", "budgets")
		for _, b := range budgets {
			bm := asMap(b)
			nodes, _, _ := unstructured.NestedString(bm, "nodes")
			s := nodes + " nodes"
			if sched, _, _ := unstructured.NestedString(bm, "schedule"); sched != "" {
				dur, _, _ := unstructured.NestedString(bm, "duration")
				s += fmt.Sprintf(" from %q for %s", sched, dur)
			}
			if reasons, _, _ := unstructured.NestedStringSlice(bm, "reasons"); len(reasons) > 0 {
				s += " (" + strings.Join(reasons, ", ") + ")"
			}
			p.Budgets = append(p.Budgets, s)
		}
		p.ExpireAfter, _, _ = unstructured.NestedString(pool.Object, "spec", "template", "spec", "expireAfter")
		if p.ExpireAfter == "" {
			p.ExpireAfter = "720h (default)"
		}
		out = append(out, p)
	}
	return out
}
