// Package audit runs one audit of one environment end to end: it picks the revision Argo CD
// synced, renders it, brings the live cache up to date for its kinds, types both sides with the
// cluster's schema and compares.
package audit

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"

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
	// RenderedInBackground, when set, lets a full audit of an env that has a report already (an
	// earlier full audit) leave a render the cache cannot answer (a new revision's: minutes at
	// 10,000 objects) running in the background, when Renders has a Worker: the audit returns a
	// *RenderingError at once, and RenderedInBackground(env) is called when the render ends. The
	// env's next full audit of that revision gets it (from the cache, or from the render when the
	// cache did not keep it), or its error. A daemon keeps auditing its other envs,
	// and this env's last report stands meanwhile: comparing the cluster with the revision
	// before would report Argo CD's sync of the new one as drift.
	RenderedInBackground func(env string)
	// People, when set, holds the API server's audit events: each drifted field gets the person
	// whose write made it (drift.Field.Actor).
	People *auditlog.Store

	schemaMu sync.Mutex
	// gitPatches caches Git's Application patches per env at a branch head (audits without Argo CD).
	gitPatchesMu sync.Mutex
	gitPatches   map[string][]render.Patch
	schemaKey    string
	schema       *drift.Schema

	bgMu sync.Mutex
	bg   map[string]*bgRender // per env

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
	patches, err := a.patches(app, req.Env)
	if err != nil {
		<-prefetched
		return nil, err
	}
	res, err := a.render(ctx, req.Env, desired, patches, a.background(req))
	if err != nil {
		<-prefetched
		return nil, err
	}
	a.runs.Add(1)
	lap("render")
	<-prefetched
	destNS := ""
	if app != nil {
		destNS = app.DestinationNamespace
	}
	// The render is held as JSON, each object decoded only while it is scoped, compared or
	// diffed: a 10,000-object render held decoded through the audit cost ~40 MB of heap beside
	// the live cache and Argo CD's diff.
	idx, kinds, unknown, err := a.scope(res, destNS)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, a.syncTimeout())
	err = a.Live.Watch(wctx, kinds, a.Options.ExtraKinds)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.Env, err)
	}
	lap("live")
	opts := a.Options
	if opts.Schema, err = a.schemaFor(ctx, kinds); err != nil {
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
	opts.Application = a.AppName(req.Env)
	opts.Excused = drift.NewExcusals()
	opts.Events = a.events()
	objs := append(drift.AuditIndex(idx, a.Live, opts), unknown...)
	drift.SortObjects(objs)
	rep := &drift.Report{Env: req.Env, Revision: desired, Objects: objs}
	lap("compare")
	if app != nil {
		if err := a.argoVerdicts(ctx, app, idx, idx.Refs(), overrides, &opts, rep); err != nil {
			return nil, err
		}
		a.memo(req.Env).Done()
		lap("argocd")
	}
	if rep.Objects == nil {
		rep.Objects = []drift.Object{}
	}
	a.attribute(rep.Objects)
	a.excusals(rep, opts.Excused)
	rep.InSync = len(rep.Objects) == 0
	if head != desired {
		rep.PendingSync = pending
		rep.HeadRevision = head
	}
	if app != nil && req.Revision == "" && (app.InProgress() || app.Failed()) {
		rep.Operation = &drift.Operation{Phase: app.Operation.Phase, Revision: app.Operation.Revision, Message: app.Operation.Message}
	}
	if req.Revision == "" {
		a.keep(req.Env, &envState{app: app, head: head, index: idx, unknown: unknown,
			opts: opts, overrides: overrides, report: rep})
	}
	return rep, nil
}
