// Package check is what a pull request that changes production must pass: it renders every env at
// two revisions, shows what changes in the rendered cluster state, evaluates the admission
// policies of policies/ offline, and checks the capacity invariants of the seeds and the rules of
// a safe Argo CD sync: every reference of a pod resolvable in its namespace (refs.go), every
// PodDisruptionBudget letting a drain through (budgets.go), sync waves in dependency order and
// route splits after the workloads they send traffic to (waves.go, firstsync.go), stateful objects kept on
// Application deletion and prune (safety.go) and no Application deleting them with it through
// Argo CD's cascade finalizer (cascade.go), databases archiving WAL and backups off the cluster
// through the Barman Cloud plugin (backup.go), KEDA triggers able to reach maxReplicaCount
// (keda.go), vLLM pods given time to drain (drain.go) and --max-num-seqs sized from a stated traffic
// profile (seqs.go); every alert with a runbook in the
// repository (runbooks.go); GPU nodes and their disruption: node classes in Git with room for the
// images and a pinned AMI, batch that survives preemption (gpu.go), GPU capacity kept in business
// hours (disruption.go); a site's own values set and no example name deployed (site.go); and the
// security of each namespace:
// Pod Security enforced at a pinned version, a default-deny NetworkPolicy that leaves DNS open
// (security.go), containers fit for the restricted level where it is enforced (restricted.go), and
// the connections the platform needs allowed by its NetworkPolicies (flows.go, netpol.go).
package check

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// renders keeps the env renders of every Run in this process by what they read (a few per
// env): an env whose base and head read the same files is rendered once, and so is an env that
// an earlier Run rendered from the same content (a test suite, a caller checking many changes).
var renders = render.NewCache("", 16)

// Run checks head against base in repo. A revision that does not exist is an error naming it.
func Run(repo *gitrepo.Repo, base, head string) (*Result, error) {
	snap, err := repo.Snapshot(head)
	if err != nil {
		return nil, err
	}
	return RunTree(repo, base, snap)
}

// RunTree checks head, a commit's tree or the work tree (gitrepo.Repo.WorkTree), against base.
// An env that cannot be checked (a file that does not parse) is an error naming it, in the
// result (EnvResult.Error) and among the returned errors; the other envs are checked all the same.
// Each env is judged at what it runs (its pin, for a pinned env) and, when pinned, at its next
// promotion: the head's overlay, as `auditor promote` would move the pin there. A violation
// fails the check unless the same one (rule, object and message) was there before the change,
// at base and at the fork point (the merge base of base and head): that one is inherited.
func RunTree(repo *gitrepo.Repo, base string, head *gitrepo.Snapshot) (*Result, error) {
	baseTree, err := treeAt(repo, base, "base")
	if err != nil {
		return nil, err
	}
	headTree, err := newTree(head, "head")
	if err != nil {
		return nil, err
	}
	fork, err := forkPoint(repo, baseTree, head)
	if err != nil {
		return nil, err
	}
	l, err := layoutOf(headTree.src)
	if err != nil {
		return nil, err
	}
	envs := l.Names()
	if len(envs) == 0 {
		return nil, fmt.Errorf("%s: the repository has no envs: list them in %s (docs/reference/layout.md), or keep one overlay per env under overlays/", headTree.describe(), layout.LayoutFile)
	}
	sort.SliceStable(envs, func(i, j int) bool { return envs[i] == "prod" && envs[j] != "prod" })
	res := &Result{Base: baseTree.snap.Revision, Head: head.Revision, WorkTree: head.WorkTree, Passed: true}
	if fork != baseTree {
		res.Fork = fork.snap.Revision
	}
	res.Paths = changedPaths(fork.snap, head)
	releases := newReleaseSources(repo)
	stacks := map[string]*envStacks{}
	var errs []error
	for _, env := range envs {
		e, _ := l.Env(env)
		if why := unchecked(e); why != "" {
			res.Envs = append(res.Envs, EnvResult{Env: env, Skipped: why, Violations: []Violation{}, Changes: []Change{}})
			continue
		}
		if err := checkable(headTree.src, e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", env, err))
			res.Envs = append(res.Envs, EnvResult{Env: env, Error: err.Error(), Violations: []Violation{}, Changes: []Change{}})
			res.Errors = append(res.Errors, env+": "+err.Error())
			res.Passed = false
			continue
		}
		stacks[env] = &envStacks{}
		er, err := checkEnv(repo, releases, baseTree, fork, headTree, env, stacks[env])
		if err != nil { // said, and the other envs still checked
			errs = append(errs, err)
			res.Envs = append(res.Envs, EnvResult{Env: env, Error: err.Error(), Violations: []Violation{}, Changes: []Change{}})
			res.Errors = append(res.Errors, env+": "+err.Error())
			res.Passed = false
			continue
		}
		er.Warnings = append(er.Warnings, unknownRules(headTree.src, l)...)
		if len(er.Violations) > 0 || (er.Next != nil && len(er.Next.Violations) > 0) {
			res.Passed = false
		}
		res.Envs = append(res.Envs, *er)
	}
	if stagedStacks(headTree.snap, res, stacks) {
		res.Passed = false
	}
	if gate := weakened(baseTree.src, l); len(gate) > 0 {
		res.Passed = false
		for env, vs := range gate {
			i := slices.IndexFunc(res.Envs, func(e EnvResult) bool { return e.Env == env })
			if i < 0 {
				res.Envs = append(res.Envs, EnvResult{Env: env, Violations: []Violation{}, Changes: []Change{}})
				i = len(res.Envs) - 1
			}
			res.Envs[i].Violations = append(res.Envs[i].Violations, vs...)
		}
	}
	return res, errors.Join(errs...)
}

// changedPaths are the files that differ between two snapshots (added, removed or edited), sorted.
func changedPaths(a, b *gitrepo.Snapshot) []string {
	var out []string
	for name, data := range a.Files {
		if other, ok := b.Files[name]; !ok || !bytes.Equal(data, other) {
			out = append(out, name)
		}
	}
	for name := range b.Files {
		if _, ok := a.Files[name]; !ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// forkPoint is the tree of the merge base of base and head's commit: base itself when it is an
// ancestor of head (or they share no history).
func forkPoint(repo *gitrepo.Repo, base *tree, head *gitrepo.Snapshot) (*tree, error) {
	at := head.Commit()
	if at == "" {
		return base, nil
	}
	mb, ok, err := repo.MergeBase(base.snap.Revision, at)
	if err != nil || !ok || mb == base.snap.Revision {
		return base, err
	}
	return treeAt(repo, mb, "fork point")
}

// checkEnv judges env at what it runs at head (its pin, for a pinned env), lists what changes
// from base, runs the repository's rules on apps/<env> and, for a pinned env, previews its next
// promotion. What the env broke at the fork point already is inherited. It fills stacks with the
// env's GPU stack parts at base and at what it runs.
func checkEnv(repo *gitrepo.Repo, releases *releaseSources, base, fork, head *tree, env string, stacks *envStacks) (*EnvResult, error) {
	// Each env is rendered at the revision it runs: its pin (apps/<env>/release.yaml) at base
	// and at head, so a change of base/ shows in prod at its pin once a promotion moves the pin,
	// and in its next promotion at once.
	er := &EnvResult{Env: env}
	if e, err := layoutEnv(head.src, env); err == nil {
		er.AppsPath = e.Apps
	}
	envHead, found, v, err := pinFindings(repo, releases, head, env)
	if err != nil {
		return nil, err
	}
	er.Revision = envHead.Revision()
	er.Applications, er.Security, er.GPUPools, er.KVCache = v.applications, v.security, v.gpuPools, v.kvCache
	er.GPUStack = v.gpuStack
	er.Warnings = append(er.Warnings, v.warnings...)
	er.Silenced = v.silenced
	// Before the change: at the fork point, and at base when the head forked from an older one.
	forkSrc, known, fv, err := pinFindings(repo, releases, fork, env)
	if err != nil {
		er.ForkError = fmt.Sprintf("not judged before the change (%v): nothing is inherited", err)
	} else if fork != base {
		if _, atBase, _, err := pinFindings(repo, releases, base, env); err != nil {
			er.ForkError, known = fmt.Sprintf("not judged at base (%v): nothing is inherited", err), nil
		} else {
			known = common(known, atBase)
		}
	}
	er.Violations, er.Inherited = split(found, known)
	if forkSrc.Revision() != er.Revision && len(er.Violations) > 0 {
		er.forgive(forcedPromotion(repo, head.snap.Commit(), fork.snap.Revision, env, er.Revision))
	}
	var baseObjs []*unstructured.Unstructured
	switch envBase, err := releases.source(base, env); {
	case fork == base && fv != nil:
		baseObjs = fv.objects
	case err == nil:
		if r, err := renderEnv(base, envBase, env); err == nil {
			baseObjs = r.objects()
		}
	}
	er.Warnings = append(er.Warnings, stackDrift(baseObjs, v.objects)...)
	stacks.base, stacks.runs = partsOf(baseObjs), partsOf(v.objects)
	if er.Changes = diffObjects(baseObjs, v.objects); er.Changes == nil {
		er.Changes = []Change{}
	}
	if er.Apps, err = appsDiff(base.src, head.src, env); err != nil {
		return nil, fmt.Errorf("%s: %w", head.name(head.src), err)
	}
	if envHead.Revision() != head.src.Revision() { // pinned (an unreadable pin is judged at head)
		if er.Next, err = nextPromotion(base, fork, head, env, v.objects); err != nil {
			return nil, err
		}
	}
	return er, nil
}
