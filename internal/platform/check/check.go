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
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/ledger"
	"github.com/llm-gitops/platform/internal/platform/policy"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// Result is the outcome of a check, per env (prod first).
type Result struct {
	Base string `json:"base"`
	// Head is the commit checked; empty when WorkTree is set.
	Head string `json:"head"`
	// WorkTree is the directory whose work tree was checked (uncommitted changes included).
	WorkTree string      `json:"workTree,omitempty"`
	Envs     []EnvResult `json:"envs"`
	// Fork is the merge base of Base and Head when it is not Base: what was broken there and at
	// Base already is inherited rather than introduced.
	Fork string `json:"fork,omitempty"`
	// Errors name the envs that could not be checked, and why (EnvResult.Error).
	Errors []string `json:"errors,omitempty"`
	// Passed is false when any env has a violation, at what it runs or at its next promotion,
	// that the change introduced.
	Passed bool `json:"passed"`
}

// EnvResult is one env's rendered diff and findings.
type EnvResult struct {
	Env string `json:"env"`
	// Error says why the env could not be checked (the rest of its result is then empty).
	Error string `json:"error,omitempty"`
	// Skipped says why the env is not checked and that this is no failure: its Applications are
	// picked from the cluster, which check does not read.
	Skipped string `json:"skipped,omitempty"`
	// Revision is the commit the env was rendered at: its pin (apps/<env>/release.yaml) when it
	// is pinned, else the head.
	Revision string   `json:"revision,omitempty"`
	Changes  []Change `json:"changes"`
	// Violations are the rules the env breaks that it did not break at the fork point: the
	// change introduced them, and it fails.
	Violations []Violation `json:"violations"`
	// Inherited are the rules it broke at the fork point already: reported, not failing.
	Inherited []Violation `json:"inherited,omitempty"`
	// Forced are the violations the promotion that moved the pin was forced past, by a reason
	// (ForcedReason) and naming their rules: reported, not failing.
	Forced       []Violation `json:"forced,omitempty"`
	ForcedReason string      `json:"forcedReason,omitempty"`
	// ForkError says why the env could not be judged at the fork point (nothing is inherited).
	ForkError string      `json:"forkError,omitempty"`
	Warnings  []Violation `json:"warnings,omitempty"`
	// Silenced are the findings of rules the repository's layout (.auditor.yaml) turns off in
	// the env, each with the layout's reason: reported, not failing.
	Silenced []Silenced `json:"silenced,omitempty"`
	// Security is what each namespace the env renders enforces (Pod Security, NetworkPolicy).
	Security []NamespaceSecurity `json:"security,omitempty"`
	// GPUPools is what each GPU NodePool gives its nodes (node class, root, AMI) and its budgets.
	GPUPools []GPUPool `json:"gpuPools,omitempty"`
	// Apps lists what changes in what the env's app-of-apps syncs from main (apps/<env>: its
	// Applications, their pins and patches, projects, the GPU stack): it reaches the env unpinned.
	Apps []Change `json:"apps,omitempty"`
	// AppsPath is the path the env's root syncs (apps/<env> in this platform's layout).
	AppsPath string `json:"appsPath,omitempty"`
	// Applications are the env's other Applications (apps/<env> besides its own), rendered from
	// Git as Argo CD renders them; the rules run on their objects too.
	Applications []AppRender `json:"applications,omitempty"`
	// KVCache is how much of each vLLM Deployment's KV cache its --max-num-seqs can use at the
	// Deployment's traffic profile (WriteKVCache prints it).
	KVCache []KVCacheUse `json:"kvCache,omitempty"`
	// Next is, for a pinned env, what it would run if the head were promoted to it.
	Next *NextPromotion `json:"nextPromotion,omitempty"`
}

// Change is an object added, removed or changed between base and head.
type Change struct {
	Kind      string              `json:"kind"`
	Namespace string              `json:"namespace,omitempty"`
	Name      string              `json:"name"`
	Change    string              `json:"change"`
	Fields    []drift.FieldChange `json:"fields,omitempty"`
}

// Violation is a broken rule: an admission policy, or a capacity invariant.
type Violation struct {
	Rule    string `json:"rule"`
	Object  string `json:"object"`
	Message string `json:"message"`
}

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
	releases := newReleaseSources(repo)
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
		er, err := checkEnv(repo, releases, baseTree, fork, headTree, env)
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
// promotion. What the env broke at the fork point already is inherited.
func checkEnv(repo *gitrepo.Repo, releases *releaseSources, base, fork, head *tree, env string) (*EnvResult, error) {
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

// pinFindings judges env at what it runs when the repository is at t: its pin (t itself when it
// follows the branch, or when its pin cannot be read: a release-pinned violation), with the
// repository's rules on apps/<env>.
func pinFindings(repo *gitrepo.Repo, releases *releaseSources, t *tree, env string) (render.Source, []Violation, *findings, error) {
	out := []Violation{}
	envSrc, pinErr := releases.source(t, env)
	if pinErr != nil {
		out = append(out, Violation{Rule: "release-pinned", Object: release.File(env), Message: pinErr.Error()})
		envSrc = t.src
	}
	v, err := judge(t, envSrc, env)
	if err != nil {
		return envSrc, nil, nil, fmt.Errorf("%s: %w", t.name(envSrc), err)
	}
	out = append(out, v.violations...)
	l, err := layoutOf(t.src)
	if err != nil || !l.Platform() {
		return envSrc, out, v, err
	}
	repoRules, err := repositoryRules(repo, t, env)
	if err != nil {
		return envSrc, nil, nil, fmt.Errorf("%s: %w", t.name(t.src), err)
	}
	repoRules, off := silence(l, env, repoRules)
	v.silenced = append(v.silenced, off...)
	return envSrc, append(out, repoRules...), v, nil
}

// forced is a promotion forced past the check: its reason and the violations it went past.
type forced struct {
	reason string
	past   map[string]bool // Violation.key
}

// repositoryRuleNames are the rules on the repository beside a render (repositoryRules): no
// promotion runs them, so none is forced past them.
var repositoryRuleNames = map[string]bool{"schedule": true, "ledger": true, "release-pinned": true, "release-patches": true}

// forcedPromotion finds, among the commits from brings that stop does not have (a merge's
// second parent too, as a pull request's merge ref or a merge commit), the promotion commit that
// moved env's pin to pin and nothing else, and returns what it says of being forced (nil: it
// was not).
func forcedPromotion(repo *gitrepo.Repo, from, stop, env, pin string) *forced {
	if from == "" {
		return nil
	}
	ctx := context.Background()
	before, err := repo.Log(ctx, stop)
	if err != nil {
		return nil
	}
	had := make(map[string]bool, len(before))
	for _, c := range before {
		had[c.Hash] = true
	}
	brought, err := repo.Log(ctx, from)
	if err != nil {
		return nil
	}
	for _, c := range brought {
		if had[c.Hash] {
			continue
		}
		to, _ := c.Trailer(release.TrailerTo)
		rev, _ := c.Trailer(release.TrailerRevision)
		reason, ok := c.Trailer(release.TrailerForced)
		if to != env || rev != pin || !ok || !onlyMovesPin(repo, c, env, pin) {
			continue
		}
		f := &forced{reason: reason, past: map[string]bool{}}
		named, _ := c.Trailer(release.TrailerForcedPast)
		for _, k := range strings.Split(named, ";") {
			if rule, object, ok := strings.Cut(strings.TrimSpace(k), " "); ok && !repositoryRuleNames[rule] {
				f.past[Violation{Rule: rule, Object: object}.key()] = true
			}
		}
		return f
	}
	return nil
}

// onlyMovesPin says commit c changes env's release file alone, to pin: what auditor promote
// writes, and no other change under its name.
func onlyMovesPin(repo *gitrepo.Repo, c gitrepo.Commit, env, pin string) bool {
	if len(c.Parents) != 1 {
		return false
	}
	after, err := repo.Snapshot(c.Hash)
	if err != nil {
		return false
	}
	before, err := repo.Snapshot(c.Parents[0])
	if err != nil {
		return false
	}
	changed := gitrepo.Changed(before, after)
	if len(changed) != 1 || changed[0] != release.File(env) {
		return false
	}
	r, err := release.Parse(env, after.Files[release.File(env)])
	return err == nil && r.Revision == pin
}

// forgive moves the violations a forced promotion named from Violations to Forced.
func (e *EnvResult) forgive(f *forced) {
	if f == nil {
		return
	}
	var still []Violation
	for _, v := range e.Violations {
		if f.past[v.key()] {
			e.Forced = append(e.Forced, v)
		} else {
			still = append(still, v)
		}
	}
	if len(e.Forced) > 0 {
		e.Violations, e.ForcedReason = append([]Violation{}, still...), f.reason
	}
}

// common is the violations in both a and b (each as many times as in both).
func common(a, b []Violation) []Violation {
	count := map[string]int{}
	for _, v := range b {
		count[v.fullKey()]++
	}
	var out []Violation
	for _, v := range a {
		if count[v.fullKey()] > 0 {
			count[v.fullKey()]--
			out = append(out, v)
		}
	}
	return out
}

// split divides found into the violations not in known (introduced) and those known already
// (inherited), matching each known one once. A violation is the same when its rule, object and
// message are: one that got worse, or better without being cleared, on the same object is new.
func split(found, known []Violation) (introduced, inherited []Violation) {
	count := map[string]int{}
	for _, k := range known {
		count[k.fullKey()]++
	}
	introduced = []Violation{}
	for _, v := range found {
		if count[v.fullKey()] > 0 {
			count[v.fullKey()]--
			inherited = append(inherited, v)
			continue
		}
		introduced = append(introduced, v)
	}
	return introduced, inherited
}

// repositoryRules are the rules on what the repository says of env beside its render: its
// schedule and ledger parse, it is pinned, and its Application's patches are scheduled scale-ups.
func repositoryRules(repo *gitrepo.Repo, head *tree, env string) ([]Violation, error) {
	out := dataFiles(head.snap, env)
	pinned, err := releasePinned(repo, head, env)
	if err != nil {
		return nil, err
	}
	out = append(out, pinned...)
	return append(out, releasePatches(head.snap, head.src, env)...), nil
}

func snapshot(repo *gitrepo.Repo, rev string) (render.Source, *gitrepo.Snapshot, error) {
	snap, err := repo.Snapshot(rev)
	if err != nil {
		return render.Source{}, nil, err
	}
	src, err := render.FromSnapshot(snap)
	return src, snap, err
}

// dataFiles validates the env's non-synced data at head: the schedule (cron, time zones, targets,
// lead time against peak length) and the model ledger (every line parses), with file and line.
func dataFiles(snap *gitrepo.Snapshot, env string) []Violation {
	var out []Violation
	if _, err := schedule.Load(snap, env); err != nil && !errors.Is(err, schedule.ErrNoSchedule) {
		out = append(out, Violation{Rule: "schedule", Object: "clusters/" + env + "/schedule.yaml", Message: err.Error()})
	}
	if data, ok, err := snap.File(ledger.Path(env)); err != nil || ok {
		if err == nil {
			_, err = ledger.Parse(ledger.Path(env), data)
		}
		if err != nil {
			out = append(out, Violation{Rule: "ledger", Object: ledger.Path(env), Message: err.Error()})
		}
	}
	return out
}

// loadPolicies renders policies/ at the head revision; nil when the revision has none.
func loadPolicies(src render.Source) (*policy.Set, error) {
	if !src.Has("policies/kustomization.yaml") {
		return nil, nil // a revision without policies/ checks capacity only
	}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: render.AppTarget("policies")})
	if err != nil {
		return nil, err
	}
	set, err := policy.New(res.Objects)
	if err != nil {
		return nil, fmt.Errorf("policies/: %w", err)
	}
	return set, nil
}

// evaluate runs every policy on every object, with the namespace labels the env renders.
func evaluate(set *policy.Set, objs []*unstructured.Unstructured) []Violation {
	nsLabels := map[string]map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			nsLabels[o.GetName()] = o.GetLabels()
		}
	}
	var out []Violation
	for _, o := range objs {
		for _, v := range set.Evaluate(o, nsLabels[o.GetNamespace()]) {
			out = append(out, Violation{Rule: v.Policy, Object: v.Object, Message: v.Message})
		}
	}
	return out
}

func id(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// secretHidden stands for a Secret's value in a Change: never the value, in any output.
const secretHidden = "(value hidden)"

// diffObjects lists objects added, removed or changed from base to head.
func diffObjects(base, head []*unstructured.Unstructured) []Change {
	key := func(o *unstructured.Unstructured) string {
		return o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	var gvks []schema.GroupVersionKind
	for _, o := range head {
		gvks = append(gvks, o.GroupVersionKind())
	}
	types := argocd.StaticSchema(gvks)
	before := map[string]*unstructured.Unstructured{}
	for _, o := range base {
		before[key(o)] = o
	}
	var out []Change
	seen := map[string]bool{}
	for _, o := range head {
		k := key(o)
		seen[k] = true
		c := Change{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
		b, ok := before[k]
		switch {
		case !ok:
			c.Change = "added"
		default:
			c.Fields = drift.CompareRendered(b.Object, o.Object, types.Type(o.GroupVersionKind()))
			if len(c.Fields) == 0 {
				continue
			}
			c.Change = "changed"
			if o.GroupVersionKind().GroupKind() == secretGK {
				for i := range c.Fields { // a Secret's values never leave check: which field changed only
					c.Fields[i].From, c.Fields[i].To = secretHidden, secretHidden
				}
			}
		}
		out = append(out, c)
	}
	for _, o := range base {
		if !seen[key(o)] {
			out = append(out, Change{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Change: "removed"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// AddPlacement adds a placement simulation of env's overlay at the head (see internal/platform/simulate)
// to env's result: to its next promotion when it is pinned.
func (r *Result) AddPlacement(env string, violations []Violation) {
	for i := range r.Envs {
		if r.Envs[i].Env == env {
			if n := r.Envs[i].Next; n != nil {
				n.Violations = append(n.Violations, violations...)
			} else {
				r.Envs[i].Violations = append(r.Envs[i].Violations, violations...)
			}
			if len(violations) > 0 {
				r.Passed = false
			}
		}
	}
}
