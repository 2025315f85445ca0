// Package audit runs one audit of one environment end to end: it picks the revision Argo CD
// synced, renders it, brings the live cache up to date for its kinds, types both sides with the
// cluster's schema and compares.
package audit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/auditlog"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
)

// Auditor audits environments of one repository against one cluster.
type Auditor struct {
	Repo *gitrepo.Repo
	Live *live.Cache
	// Options for the comparison; Schema and Normalizer are filled per audit.
	Options drift.Options
	// AppNamespace holds the Applications (argocd); AppName maps an env to its Application.
	AppNamespace string
	AppName      func(env string) string
	// Renders caches renders by what they read (nil: render every time); New gives an in-memory
	// one, the CLI one on disk.
	Renders *render.Cache
	// Verdicts returns the memo of an env's Argo CD verdicts: the objects its diff found in sync
	// (nil, or a nil memo: diff every object).
	Verdicts func(env string) *argocd.Memo
	// SyncTimeout bounds the wait for the live cache of the kinds an audit needs (default 1m):
	// a kind that cannot be listed fails that audit, naming the kind, instead of hanging it.
	SyncTimeout time.Duration
	// Timing, when set, is told how long each stage of a Run took: git (Application and
	// revisions), render, live (list and watch), schema, compare, argocd.
	Timing func(stage string, took time.Duration)
	// People, when set, holds the API server's audit events: each drifted field gets the person
	// whose write made it (drift.Field.Actor).
	People *auditlog.Store

	schemaMu  sync.Mutex
	schemaKey string
	schema    *drift.Schema

	statesMu sync.Mutex
	states   map[string]*envState // the last full audit of each env, for Update

	runs, updates atomic.Int64
}

// Counts returns how many full audits (Run, including those Update fell back to) and how many
// incremental ones (Update on top of the last full audit) this Auditor did.
func (a *Auditor) Counts() (full, incremental int64) { return a.runs.Load(), a.updates.Load() }

// New returns an Auditor with the repository's conventions: Application llm-<env> in argocd.
func New(repo *gitrepo.Repo, cache *live.Cache) *Auditor {
	opts := drift.DefaultOptions()
	opts.Defaults, opts.Builtin = argocd.Defaults, argocd.Builtin
	// Secret values are reported as HMACs under a key of this process: equal within a report,
	// unrelated across runs, never reversible by a dictionary.
	opts.SecretKey = make([]byte, 32)
	if _, err := rand.Read(opts.SecretKey); err != nil {
		opts.SecretKey = nil // "(redacted)" only
	}
	return &Auditor{
		Repo: repo, Live: cache, Options: opts, AppNamespace: "argocd", Renders: render.NewCache("", 4),
		Verdicts: argocd.MemoPerEnv(func(string) string { return "" }),
		AppName:  func(env string) string { return "llm-" + env },
	}
}

// Request says what to audit.
type Request struct {
	Env string
	// Revision forces the desired revision; empty means the one Argo CD synced, or the branch head.
	Revision string
}

// Run audits one environment.
func (a *Auditor) Run(ctx context.Context, req Request) (*drift.Report, error) {
	a.runs.Add(1)
	lap := a.stopwatch()
	app, err := a.application(ctx, req.Env)
	if err != nil {
		return nil, err
	}
	desired, head, pending, err := a.revisions(app, req)
	if err != nil {
		return nil, err
	}
	lap("git")
	// While kustomize renders (one core), list and watch the kinds every env has and fetch their
	// schema documents on the other: the audit then waits only for kinds the render adds.
	prefetched := make(chan struct{})
	go func() {
		defer close(prefetched)
		pctx, cancel := context.WithTimeout(ctx, a.syncTimeout())
		defer cancel()
		prefetch(pctx, a.Live, a.Options.ExtraKinds)
	}()
	res, err := a.render(req.Env, desired)
	if err != nil {
		<-prefetched
		return nil, err
	}
	lap("render")
	<-prefetched
	destNS := ""
	if app != nil {
		destNS = app.DestinationNamespace
	}
	served, unknown := a.scope(res.Objects, destNS)
	wctx, cancel := context.WithTimeout(ctx, a.syncTimeout())
	err = a.Live.Watch(wctx, kindsOf(served), a.Options.ExtraKinds)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.Env, err)
	}
	lap("live")
	opts := a.Options
	if opts.Schema, err = a.schemaFor(ctx, served); err != nil {
		return nil, fmt.Errorf("%s: %w", req.Env, err)
	}
	var overrides map[string]v1alpha1.ResourceOverride
	if app != nil {
		if overrides, err = a.overrides(ctx); err != nil {
			return nil, err
		}
		if opts.Normalizer, err = app.Normalizer(overrides); err != nil {
			return nil, err
		}
	}
	lap("schema")
	objs := append(drift.Audit(served, a.Live, opts), unknown...)
	drift.SortObjects(objs)
	rep := &drift.Report{Env: req.Env, Revision: desired, Objects: objs}
	lap("compare")
	if app != nil {
		if err := a.argoVerdicts(ctx, app, served, overrides, &opts, rep); err != nil {
			return nil, err
		}
		a.memo(req.Env).Done()
		lap("argocd")
	}
	if rep.Objects == nil {
		rep.Objects = []drift.Object{}
	}
	a.attribute(rep.Objects)
	rep.InSync = len(rep.Objects) == 0
	if head != desired {
		rep.PendingSync = pending
		rep.HeadRevision = head
	}
	if app != nil && req.Revision == "" && (app.InProgress() || app.Failed()) {
		rep.Operation = &drift.Operation{Phase: app.Operation.Phase, Revision: app.Operation.Revision, Message: app.Operation.Message}
	}
	if req.Revision == "" {
		a.keep(req.Env, &envState{app: app, head: head, index: drift.NewIndex(served).Compact(), unknown: unknown,
			opts: opts, overrides: overrides, report: rep})
	}
	return rep, nil
}

// revisions picks the desired revision (forced, else the one Argo CD synced, else the branch
// head) and says whether the branch head is a pending sync: ahead of the synced revision, which
// it descends from. A branch that was reset behind the synced revision is not pending.
func (a *Auditor) revisions(app *argocd.App, req Request) (desired, head string, pending bool, err error) {
	branch := "HEAD"
	if app != nil && app.TargetRevision != "" && app.TargetRevision != "HEAD" {
		branch = app.TargetRevision
	}
	if head, err = a.Repo.Resolve(branch); err != nil {
		return "", "", false, err
	}
	desired = head
	switch {
	case req.Revision != "":
		desired, err = a.Repo.Resolve(req.Revision)
		return desired, head, false, err
	case app != nil && app.SyncedRevision != "":
		if desired, err = a.Repo.Resolve(app.SyncedRevision); err != nil {
			return "", "", false, fmt.Errorf("Application %s/%s is synced to %s, which the repository does not have (fetch it?): %w", app.Namespace, app.Name, app.SyncedRevision, err)
		}
	}
	if head == desired {
		return desired, head, false, nil
	}
	pending, err = a.Repo.IsAncestor(desired, head)
	return desired, head, pending, err
}

// scope splits the rendered objects into those of kinds the cluster serves — namespaced ones
// given the Application's destination namespace when Git leaves it out, cluster-scoped ones
// stripped of a namespace the API server would ignore — and Unknown objects of kinds it lacks.
func (a *Auditor) scope(objs []*unstructured.Unstructured, destNS string) (served []*unstructured.Unstructured, unknown []drift.Object) {
	if destNS == "" {
		destNS = "default"
	}
	for _, o := range objs {
		m, err := a.Live.Mapping(o.GroupVersionKind())
		if err != nil {
			unknown = append(unknown, drift.Object{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(),
				Name: o.GetName(), Status: drift.Unknown, Fields: []drift.Field{}, Note: err.Error()})
			continue
		}
		namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
		switch {
		case namespaced && o.GetNamespace() == "":
			o = o.DeepCopy()
			o.SetNamespace(destNS)
		case !namespaced && o.GetNamespace() != "":
			o = o.DeepCopy()
			o.SetNamespace("")
		}
		if ns := o.GetNamespace(); namespaced && !a.Live.Covers(ns) {
			unknown = append(unknown, drift.Object{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: ns,
				Name: o.GetName(), Status: drift.Unknown, Fields: []drift.Field{},
				Note: fmt.Sprintf("namespace %s is not among the namespaces the auditor watches (watchNamespaces): add it, and the auditor's read access there", ns)})
			continue
		}
		served = append(served, o)
	}
	return served, unknown
}

// schemaFor types the kinds of objs from the cluster's OpenAPI v3, reusing the last schema while
// the documents behind it are unchanged.
func (a *Auditor) schemaFor(ctx context.Context, objs []*unstructured.Unstructured) (*drift.Schema, error) {
	seen := map[schema.GroupVersion]bool{}
	var gvs []schema.GroupVersion
	for _, gvk := range kindsOf(objs) {
		if gv := gvk.GroupVersion(); !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
	}
	models, key, err := a.Live.OpenAPIModels(ctx, gvs)
	if err != nil {
		return nil, err
	}
	a.schemaMu.Lock()
	defer a.schemaMu.Unlock()
	if a.schema != nil && a.schemaKey == key {
		return a.schema, nil
	}
	s, err := drift.NewSchema(models)
	if err != nil {
		return nil, err
	}
	a.schema, a.schemaKey = s, key
	return s, nil
}

// application reads the env's Application; nil when Argo CD (or the Application) is absent.
func (a *Auditor) application(ctx context.Context, env string) (*argocd.App, error) {
	u, err := a.Live.GetDirect(ctx, argocd.ApplicationGVK, a.AppNamespace, a.AppName(env))
	var kerr *live.KindError
	if apierrors.IsNotFound(err) || errors.As(err, &kerr) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return argocd.FromUnstructured(u)
}

// overrides reads argocd-cm's ignoreDifferences customizations; none when the ConfigMap is
// absent or the auditor may not read it.
func (a *Auditor) overrides(ctx context.Context) (map[string]v1alpha1.ResourceOverride, error) {
	u, err := a.Live.GetDirect(ctx, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, a.AppNamespace, argocd.ConfigMapName)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	return argocd.Overrides(data)
}

func kindsOf(objs []*unstructured.Unstructured) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if !seen[gvk] {
			seen[gvk] = true
			out = append(out, gvk)
		}
	}
	return out
}

// render renders env at revision, through the render cache when the Auditor has one.
func (a *Auditor) render(env, revision string) (*render.Result, error) {
	if res, ok := a.Renders.ByRevision(env, revision); ok {
		return res, nil
	}
	snap, err := a.Repo.Snapshot(revision)
	if err != nil {
		return nil, err
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return nil, err
	}
	res, err := src.RenderCached(env, a.Renders)
	if err != nil {
		return nil, fmt.Errorf("%s at %.12s: %w", env, revision, err)
	}
	return res, nil
}

// stopwatch returns a function that reports the time since its last call under a stage name.
func (a *Auditor) stopwatch() func(stage string) {
	last := time.Now()
	return func(stage string) {
		now := time.Now()
		if a.Timing != nil {
			a.Timing(stage, now.Sub(last))
		}
		last = now
	}
}

// prefetch starts watching kinds and fetches their group-versions' schema documents; errors are
// left to the audit's own calls, which ask again.
func prefetch(ctx context.Context, c *live.Cache, kinds []schema.GroupVersionKind) {
	if err := c.Watch(ctx, nil, kinds); err != nil {
		return
	}
	seen := map[schema.GroupVersion]bool{}
	var gvs []schema.GroupVersion
	for _, k := range kinds {
		if gv := k.GroupVersion(); !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
	}
	_, _, _ = c.OpenAPIModels(ctx, gvs)
}

func (a *Auditor) syncTimeout() time.Duration {
	if a.SyncTimeout > 0 {
		return a.SyncTimeout
	}
	return time.Minute
}

// attribute names the person behind each drifted field from the audit events held, when any;
// and who created each Extra object and deleted each Missing one.
func (a *Auditor) attribute(objs []drift.Object) {
	if a.People != nil {
		Attribute(objs, a.Live, a.People, a.Options.Applier)
	}
}

// Attribute names, from the audit events people holds, the person behind each drifted field of
// objs (matched by Store.Who against the live object's UID and resourceVersion), who created each
// Extra object and who deleted each Missing one. applier is the GitOps sync's field manager. It
// returns how many were named.
func Attribute(objs []drift.Object, c *live.Cache, people *auditlog.Store, applier string) int {
	named := 0
	for i := range objs {
		o := &objs[i]
		switch {
		case o.Status == drift.Missing, o.Status == drift.Extra:
		case o.Status != drift.Modified || len(o.Fields) == 0:
			continue
		}
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			continue
		}
		gvk := gv.WithKind(o.Kind)
		m, err := c.Mapping(gvk)
		if err != nil {
			continue
		}
		ref := auditlog.Object{Group: gv.Group, Resource: m.Resource.Resource, Namespace: o.Namespace, Name: o.Name}
		if o.Status == drift.Missing {
			if o.Actor = people.Deleter(ref); o.Actor != nil {
				named++
			}
			continue
		}
		var now auditlog.Live
		if l, ok := c.Get(gvk, o.Namespace, o.Name); ok {
			now = auditlog.Live{UID: string(l.GetUID()), ResourceVersion: l.GetResourceVersion()}
		}
		if o.Status == drift.Extra {
			if o.Actor = people.Creator(ref, now.UID); o.Actor != nil {
				named++
			}
			continue
		}
		for j := range o.Fields {
			if o.Fields[j].Actor = people.Who(ref, now, &o.Fields[j], applier); o.Fields[j].Actor != nil {
				named++
			}
		}
	}
	return named
}
