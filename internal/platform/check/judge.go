package check

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
	"github.com/llm-gitops/platform/internal/platform/policy"
)

// tree is the repository at one commit, or its work tree, as the rules read it: the files
// (schedules, ledgers, runbooks, profiles) and the Source over them (apps/, policies/).
type tree struct {
	snap *gitrepo.Snapshot
	src  render.Source
	// role names the tree in errors: head, base, fork point.
	role string
}

// treeAt reads the repository's tree at rev.
func treeAt(repo *gitrepo.Repo, rev, role string) (*tree, error) {
	snap, err := repo.Snapshot(rev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	return newTree(snap, role)
}

// newTree is the tree of a snapshot.
func newTree(snap *gitrepo.Snapshot, role string) (*tree, error) {
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return nil, err
	}
	return &tree{snap: snap, src: src, role: role}, nil
}

// name says which tree an error is about: an env's pin, the tree's commit, or its work tree.
func (t *tree) name(envSrc render.Source) string {
	if envSrc.Revision() != t.snap.Revision {
		return t.role + "'s pin " + gitrepo.Short(envSrc.Revision())
	}
	return t.describe()
}

// describe names the tree: "head <commit>", "base <commit>" or "the work tree of <dir>".
func (t *tree) describe() string {
	if t.snap.Revision == "" {
		return "the work tree of " + t.snap.WorkTree
	}
	return t.role + " " + gitrepo.Short(t.snap.Revision)
}

// policySets keeps the admission policies read at each commit (a check reads a few).
var policySets sync.Map // commit → *policy.Set

// envPolicies are the admission policies the env runs with: policies/ at the revision it renders
// (its Application llm-policies is pinned with its overlay); nil when that revision has none.
func envPolicies(envSrc render.Source) (*policy.Set, error) {
	rev := envSrc.Revision()
	if rev != "" {
		if p, ok := policySets.Load(rev); ok {
			return p.(*policy.Set), nil
		}
	}
	pols, err := loadPolicies(envSrc)
	if err != nil {
		return nil, err
	}
	if rev != "" {
		policySets.Store(rev, pols)
	}
	return pols, nil
}

// rendered is one env's render with the other Applications apps/<env> declares.
type rendered struct {
	// own is the env's overlay; other each other Application's objects (sync waves order one
	// Application's objects, so the wave rules run per render).
	own                  []*unstructured.Unstructured
	other                [][]*unstructured.Unstructured
	applications         []AppRender
	violations, warnings []Violation
}

// objects are every object the env's Applications render.
func (r *rendered) objects() []*unstructured.Unstructured {
	return append(slices.Clip(r.own), slices.Concat(r.other...)...)
}

// renderEnv renders env from envSrc (its overlay at a pin, or at t itself; none in a layout
// without one) and the other Applications its root syncs at t.
func renderEnv(t *tree, envSrc render.Source, env string) (*rendered, error) {
	e, err := layoutEnv(t.src, env)
	if err != nil {
		return nil, err
	}
	var own []*unstructured.Unstructured
	if e.Overlay != "" { // the convention's own Application over overlays/<env>, at the env's pin
		h, err := render.Engine{Cache: renders}.Render(context.Background(), envSrc, render.Target{Name: env})
		if err != nil {
			return nil, err
		}
		own = h.Objects
	}
	other, apps, v, w, err := otherApplications(t.src, envSrc, e)
	if err != nil {
		return nil, err
	}
	return &rendered{own: own, other: other, applications: apps, violations: v, warnings: w}, nil
}

// findings is what the rules say of one env's render.
type findings struct {
	objects              []*unstructured.Unstructured
	applications         []AppRender
	violations, warnings []Violation
	// silenced are the findings of rules the repository's layout turns off in the env.
	silenced []Silenced
	security []NamespaceSecurity
	gpuPools []GPUPool
	kvCache  []KVCacheUse
	// gpuStack is the env's GPU stack triple (nil: no GPUs, or no clusters/gpu-stack.yaml).
	gpuStack *gpustack.Triple
}

// judge renders env from envSrc with the other Applications of its root at t, and runs the
// rules on the objects: the generic ones (t's admission policies, sync waves, first sync, refs,
// flows) and, where the repository opts in, this platform's (platformRules).
func judge(t *tree, envSrc render.Source, env string) (*findings, error) {
	r, err := renderEnv(t, envSrc, env)
	if err != nil {
		return nil, err
	}
	objs := r.objects()
	out := &findings{objects: objs, applications: r.applications, violations: r.violations, warnings: r.warnings}
	add := func(v, w []Violation) {
		out.violations = append(out.violations, v...)
		out.warnings = append(out.warnings, w...)
	}
	pols, err := envPolicies(envSrc)
	if err != nil {
		return nil, err
	}
	if pols != nil {
		add(evaluate(pols, objs), nil)
	}
	for _, one := range append([][]*unstructured.Unstructured{r.own}, r.other...) {
		add(waveOrder(one), nil)
		add(firstSyncSplits(one), nil)
		add(routesAfterBackends(one), nil)
	}
	add(jobsSyncAgain(objs), nil)
	add(refsResolve(objs), nil)
	add(inferenceRoutes(objs), nil)
	add(inferenceCanaryWeights(objs), nil)
	add(flowsAllowed(envSrc, t.src, env, objs))
	l, err := layoutOf(t.src)
	if err != nil {
		return nil, err
	}
	if l.Platform() {
		if err := platformRules(t, envSrc, env, objs, out, add); err != nil {
			return nil, err
		}
	}
	var off []Silenced
	out.violations, off = silence(l, env, out.violations)
	out.silenced = append(out.silenced, off...)
	out.warnings, off = silence(l, env, out.warnings)
	out.silenced = append(out.silenced, off...)
	return out, nil
}

// platformRules runs this platform's rules (layout.ProfileLLMPlatform) on env's objects: runbooks,
// stateful data, backups, KEDA, vLLM, GPU pools, drains, pod security, capacity, traffic
// profiles and the KV cache, site values.
func platformRules(t *tree, envSrc render.Source, env string, objs []*unstructured.Unstructured, out *findings, add func(v, w []Violation)) error {
	add(alertRunbooks(objs, t.snap.Files), nil)
	add(retainStateful(objs), nil)
	apps, err := envApplications(t.src, env)
	if err != nil {
		return err
	}
	add(cascadeStateful(apps, objs), nil)
	add(backupOffsite(objs), nil)
	add(kedaReach(objs), nil)
	add(vllmDrain(objs), nil)
	add(vllmWeights(objs), nil)
	add(vllmDtype(objs), nil)
	add(inferencePools(objs), nil)
	add(inferencePoolOverlaps(objs), nil)
	add(inferencePoolPorts(objs), nil)
	add(inferencePickerRBAC(objs), nil)
	add(inferenceObjectivePools(objs), nil)
	out.gpuPools = gpuPoolPosture(objs)
	add(gpuNodeClassRoot(objs), nil)
	if err := gpuStackRule(t, envSrc, env, objs, out, add); err != nil {
		return err
	}
	add(gpuDisruptionBudget(objs), nil)
	add(drainPossible(objs), nil)
	add(batchPreemption(objs), nil)
	add(nil, vllmWarnings(objs))
	posture, v, w := namespaceSecurity(objs)
	out.security = posture
	add(v, w)
	add(restrictedPods(objs), nil)
	add(replicasSpread(objs), nil)
	add(imageDigests(objs), nil)
	add(capacityInvariants(objs))
	measured, v, w := trafficProfiles(t.snap, env, objs)
	add(v, w)
	kv, v, w := vllmMaxNumSeqs(objs, measured)
	out.kvCache = kv
	add(v, w)
	add(siteValues(envSrc, t.src, env, objs))
	return nil
}

// gpuStackRule reads env's GPU stack triple from its render and runs the rule gpu-stack on it,
// with the table at the env's revision (its AMIs, images, CUDA minimums and stated triple) and
// at t (the GPU Operator, which apps/ syncs from there).
func gpuStackRule(t *tree, envSrc render.Source, env string, objs []*unstructured.Unstructured, out *findings, add func(v, w []Violation)) error {
	table, err := stackTable(envSrc)
	if err != nil {
		return err
	}
	head, err := stackTable(t.src)
	if err != nil {
		return err
	}
	var apps []*unstructured.Unstructured
	if r, err := appsOf(t.src, env); err == nil && r != nil {
		apps = r.Objects
	}
	s := stackOf(objs, apps)
	if table == nil || s.none() {
		return nil
	}
	tr := s.triple(table)
	out.gpuStack = &tr
	add(gpuStack(table, head, env, s), nil)
	return nil
}
