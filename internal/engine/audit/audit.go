// Package audit runs one audit of one environment end to end: it picks the revision Argo CD
// synced, renders it, brings the live cache up to date for its kinds, types both sides with the
// cluster's schema and compares.
package audit

import (
	"context"
	"crypto/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// Auditor audits environments of one repository against one cluster. Make one with New.
type Auditor struct {
	Config
	// Options are the comparison's options; Schema and Normalizer are filled per audit.
	Options drift.Options

	// What the audits keep, each behind its own pointer: New sets every field of the Auditor and
	// nothing writes one after.
	state *State
	cache *caches
	count *counts
	bgs   *backgroundState // the renders left to the background (behind)
}

// State is what incremental audits build on: the last full audit of each Application and of
// each env's group. Config.State hands the caller's own; its zero value is empty and ready.
type State struct {
	mu     sync.Mutex
	units  map[string]*unit          // the last full audit of each Application, by unit key
	last   map[string][]drift.Object // the drifted objects each unit's last audit found, by unit key
	groups map[string]*groupState    // the last full audit of each env's group, for Update
}

// caches are what the Auditor read once and reads again only when it changed.
type caches struct {
	argoMu sync.Mutex
	argo   reposerver.Settings // argocd-cm's, for the repo-server
	argoOf *string             // the resourceVersion they were read at ("": none)

	patchesMu sync.Mutex
	// patches caches Git's Application patches per env at a branch head (audits without Argo CD).
	patches map[string][]render.Patch

	schemaMu  sync.Mutex
	schemaKey string
	schema    *drift.Schema
}

// counts are the audits done, by kind.
type counts struct {
	runs, updates, aloneAudits atomic.Int64
}

// controllers are env's controller rules: Config.Controllers', else the comparison's defaults.
func (a *Auditor) controllers(env string) []drift.ControllerRule {
	if a.Controllers != nil {
		return a.Controllers(env)
	}
	return a.Options.Controllers
}

// Counts returns how many full audits of the cluster's state ended with a report (Run without a
// revision, including those Update fell back to) and how many incremental ones (Update on top of
// the last full audit) this Auditor did.
func (a *Auditor) Counts() (full, incremental int64) {
	return a.count.runs.Load(), a.count.updates.Load()
}

// New returns an Auditor made with cfg, a default applied to each field it leaves unset: the
// repository's conventions (Application llm-<env> in argocd, root-<env> over it), an in-memory
// render cache and verdict memo, and secret values reported as HMACs under a key of this process.
func New(cfg Config) *Auditor {
	opts := drift.DefaultOptions()
	opts.Defaults, opts.Builtin = argocd.Defaults, argocd.Builtin
	// Equal within a report, unrelated across runs, never reversible by a dictionary.
	opts.SecretKey = make([]byte, 32)
	if _, err := rand.Read(opts.SecretKey); err != nil {
		opts.SecretKey = nil // "(redacted)" only
	}
	if cfg.Drift != nil {
		cfg.Drift(&opts)
	}
	if cfg.AppNamespace == "" {
		cfg.AppNamespace = "argocd"
	}
	if cfg.AppName == nil {
		cfg.AppName = defaultAppName
	}
	if cfg.RootName == nil {
		cfg.RootName = RootName
	}
	if cfg.RootManifest == nil {
		cfg.RootManifest = RootManifest
	}
	if cfg.Renders == nil {
		cfg.Renders = render.NewCache("", 4)
	}
	if cfg.Verdicts == nil {
		cfg.Verdicts = argocd.MemoPerEnv(func(string) string { return "" })
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = time.Minute
	}
	if cfg.Charts == nil {
		cfg.Charts = &render.Charts{}
	}
	if cfg.MaxApplications <= 0 {
		cfg.MaxApplications = 1000
	}
	if cfg.State == nil {
		cfg.State = &State{}
	}
	return &Auditor{Config: cfg, Options: opts, state: cfg.State, cache: &caches{}, count: &counts{}, bgs: &backgroundState{}}
}

// Request says what to audit.
type Request struct {
	Env string
	// Revision forces the desired revision; empty means the one Argo CD synced, or the branch head.
	Revision string
	// renders keeps each unit's render (RenderGroup).
	renders bool
}

// Run audits one environment: every Application of its group (see group), or its one
// Application when it has no root Application.
func (a *Auditor) Run(ctx context.Context, req Request) (*drift.Report, error) {
	lap := a.stopwatch()
	// While kustomize renders (one core), list and watch the kinds every env has and fetch their
	// schema documents on the other: the audit then waits only for kinds the render adds.
	prefetched := make(chan struct{})
	go func() {
		defer close(prefetched)
		pctx, cancel := context.WithTimeout(ctx, a.SyncTimeout)
		defer cancel()
		prefetch(pctx, a.Live, a.Options.ExtraKinds)
	}()
	head, _ := a.Repo.Resolve("HEAD") // before the renders: a fetch meanwhile is a move for Update
	units, err := a.prepareGroup(ctx, req, lap)
	<-prefetched
	if err != nil {
		return nil, err
	}
	declared := a.declaredBy(units)
	ex := drift.NewExcusals()
	away, heads := a.awayOf(units, head)
	units = slices.DeleteFunc(units, func(p *unit) bool { return p.elsewhere })
	for _, p := range units {
		if p.err != nil {
			continue
		}
		if err := a.compare(ctx, req, p, declared, ex, lap); err != nil {
			if p.own() || !p.inGroup() {
				return nil, err
			}
			p.err = unreachable(p, err) // this Application is not audited; the others are
		}
	}
	if ctx.Err() != nil { // cancelled: nothing of this audit is a verdict
		return nil, ctx.Err()
	}
	rep := a.merge(req.Env, units, ex)
	if req.Revision == "" {
		a.keepGroup(req.Env, units, away, heads, ex)
		a.count.runs.Add(1)
	}
	return rep, nil
}
