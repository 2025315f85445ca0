package check

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// stageBefore is the env before env on the promotion path (staging for prod); "" when none.
func stageBefore(env string) string {
	i := slices.Index(release.Order, env)
	if i <= 0 {
		return ""
	}
	return release.Order[i-1]
}

// stagedStacks is the rule gpu-stack-staged over the envs of a check: a triple an env moves to
// (at what it runs, from base; at its next promotion, from its pin) must be one the env before
// it on the promotion path runs or will run at the head, or one that env's GPU stack ledger
// shows it ran healthy. A triple changed in prod's overlay alone never reaches staging first.
// It reports whether it added a violation.
func stagedStacks(head *gitrepo.Snapshot, res *Result, stacks map[string]*envStacks) bool {
	added := false
	for i := range res.Envs {
		e := &res.Envs[i]
		prev := stageBefore(e.Env)
		j := slices.IndexFunc(res.Envs, func(o EnvResult) bool { return o.Env == prev })
		if prev == "" || j < 0 {
			continue
		}
		p, es, ps := &res.Envs[j], stacks[e.Env], stacks[prev]
		if es == nil || ps == nil {
			continue // not checked
		}
		staged := func(t gpustack.Triple) bool {
			if (ps.runs != nil && samePinned(*ps.runs, t)) || (p.Next != nil && p.Next.GPUStack != nil && samePinned(*p.Next.GPUStack, t)) {
				return true
			}
			records, err := stackLedger(head, prev)
			if err != nil {
				return true // the rule ledger says it
			}
			_, ok := ledger.HealthySince(records, t)
			return ok
		}
		moves := []struct {
			from, to   *gpustack.Triple
			violations *[]Violation
		}{{es.base, e.GPUStack, &e.Violations}}
		if e.Next != nil {
			moves = append(moves, struct {
				from, to   *gpustack.Triple
				violations *[]Violation
			}{es.runs, e.Next.GPUStack, &e.Next.Violations})
		}
		for _, m := range moves {
			if m.to == nil || (m.from != nil && samePinned(*m.from, *m.to)) || staged(*m.to) {
				continue
			}
			*m.violations = append(*m.violations, Violation{Rule: "gpu-stack-staged", Object: gpustack.File + " envs." + e.Env, Message: fmt.Sprintf(
				"%s would run %s, which %s does not run, will not run at this change, and never ran healthy (%s): change the triple where %s takes it first, then promote",
				e.Env, m.to, prev, ledger.StackPath(prev), prev)})
			added = true
		}
	}
	return added
}

// stackLedger reads env's GPU stack ledger from a snapshot (none: no records).
func stackLedger(snap *gitrepo.Snapshot, env string) ([]ledger.StackRecord, error) {
	data, ok, err := snap.File(ledger.StackPath(env))
	if err != nil || !ok {
		return nil, err
	}
	return ledger.ParseStacks(ledger.StackPath(env), data)
}

// soaked is the rule gpu-stack-soak of a promotion: env moving from the triple before to the
// one after must take a triple the env before it on the path has run healthy for the table's
// soak time, by that env's GPU stack ledger at head. The first pinned env (staging) is the stand
// itself: what follows the branch before it (dev) soaks nothing.
func soaked(head *gitrepo.Snapshot, table *gpustack.Table, env string, before, after *gpustack.Triple, now time.Time) []Violation {
	prev := stageBefore(env)
	if prev == "" || prev == release.Following || table == nil || after == nil || (before != nil && before.Same(*after)) {
		return nil
	}
	records, err := stackLedger(head, prev)
	if err != nil {
		return []Violation{{Rule: "ledger", Object: ledger.StackPath(prev), Message: err.Error()}}
	}
	obj := gpustack.File + " envs." + env
	since, ok := ledger.HealthySince(records, *after)
	switch {
	case !ok:
		return []Violation{{Rule: "gpu-stack-soak", Object: obj, Message: fmt.Sprintf(
			"%s would run %s, which %s has never run healthy (%s): promote it to %s first and let it soak %s", env, after, prev, ledger.StackPath(prev), prev, table.Soak)}}
	case now.Sub(since) < table.Soak.Duration:
		return []Violation{{Rule: "gpu-stack-soak", Object: obj, Message: fmt.Sprintf(
			"%s would run %s, which %s has run healthy since %s, %s of the %s soak: wait until %s",
			env, after, prev, since.UTC().Format(time.RFC3339), now.Sub(since).Truncate(time.Minute), table.Soak, since.Add(table.Soak.Duration).UTC().Format(time.RFC3339))}}
	}
	return nil
}

// envStacks are the AMI and image an env pins at base and at what it runs (its pin, from which
// its next promotion moves); nil without GPUs.
type envStacks struct{ base, runs *gpustack.Triple }

// partsOf is the AMI and image an env's objects pin (its GPU Operator is the head's in every
// render of a check); nil without GPUs.
func partsOf(objs []*unstructured.Unstructured) *gpustack.Triple {
	s := stackOf(objs, nil)
	if s.none() {
		return nil
	}
	tr := s.triple(nil)
	return &tr
}

// samePinned compares the parts an env's overlay pins: its AMI and image (Triple.Same).
func samePinned(a, b gpustack.Triple) bool { return a.Same(b) }

// EnvStack is the GPU stack triple env runs when the repository's branch is at head (its pin,
// for a pinned env), and the commit it renders at; nil when it has no GPUs or the revision has
// no clusters/gpu-stack.yaml.
func EnvStack(repo *gitrepo.Repo, head, env string) (*gpustack.Triple, string, error) {
	t, err := treeAt(repo, head, "head")
	if err != nil {
		return nil, "", err
	}
	src, err := newReleaseSources(repo).source(t, env)
	if err != nil {
		return nil, "", err
	}
	r, err := renderEnv(t, src, env)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", t.name(src), err)
	}
	table, err := stackTable(src)
	if err != nil || table == nil {
		return nil, src.Revision(), err
	}
	var apps []*unstructured.Unstructured
	if a, err := appsOf(t.src, env); err == nil && a != nil {
		apps = a.Objects
	}
	s := stackOf(r.objects(), apps)
	if s.none() {
		return nil, src.Revision(), nil
	}
	tr := s.triple(table)
	return &tr, src.Revision(), nil
}
