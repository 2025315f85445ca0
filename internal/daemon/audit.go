package daemon

import (
	"context"
	"errors"
	"maps"
	"net"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/audit"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
)

// auditorFor returns the daemon's Auditor, made anew only when the repository or the live cache
// changed, so renders are cached by what they read and the schema by its documents across audits.
func (d *Daemon) auditorFor(repo *gitrepo.Repo, c *live.Cache) *audit.Auditor {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.auditor; a != nil && a.Repo == repo && a.Live == c {
		return a
	}
	cfg := audit.Config{
		Repo: repo, Live: c, People: d.people, AppNamespace: d.cfg.AppNamespace, Envs: d.cfg.Envs,
		AppName:  func(env string) string { return d.cfg.AppNamePrefix + env },
		RootName: func(env string) string { return d.cfg.RootNamePrefix + env },
		Select: func(env string) *audit.AppSelection {
			if sel, ok := d.cfg.Applications[env]; ok {
				return sel.selection(d.cfg.AppNamespace)
			}
			return nil
		},
		Renders: d.renderCache(2), // the synced revision and the one before: a 10,000-object render is ~9 MiB as JSON
		// A new revision's render runs in the background (in the worker): the loop goes on
		// auditing the other envs and serving fetches meanwhile, and audits this env once the
		// render is in. The env's next audit is full (Run), so that it takes the render up.
		RenderedInBackground: func(env string) { d.setWaiting(env, true); d.markDirty() },
		RepoServer:           d.repoServer,
		Clusters:             d.clusters(),
		Owns:                 d.ownsFunc(),
		ClusterName:          d.clusterName(),
		Drift: func(o *drift.Options) {
			o.SecretKey = d.hmacKey
			d.cfg.Extra.apply(o)
			o.IgnoreOwnership = d.cfg.IgnoreClearedManagedFields
			if len(d.cfg.Identities) > 0 {
				o.Identities = maps.Clone(drift.DefaultIdentities)
				maps.Copy(o.Identities, d.cfg.Identities)
			}
		},
	}
	if gitrepo.IsURL(d.cfg.Repo) {
		cfg.RepoURL = d.cfg.Repo
	}
	cfg.Renders.Urgent = true // an audit's render goes before blame walks', ledger syncs' and the web view's
	a := audit.New(cfg)
	d.auditor = a
	return a
}

// renderCache is a render cache keeping n renders per env (as JSON: not Shared, since the daemon
// keeps its caches for its lifetime and shared entries would hold decoded renders), whose renders
// run in the daemon's render worker. Every render of `auditor serve` goes through one: audits,
// blame and adopt walks, the ledger and the web view.
func (d *Daemon) renderCache(n int) *render.Cache {
	c := render.NewCache("", n)
	c.Worker = d.worker
	return c
}

// startWorker makes the audits render in a child process (render.Worker) unless the config asks
// for in-process renders, and exposes the worker's figures: kustomize's working set (about
// 1.1 GiB at 10,000 objects) is then the child's, which exits, and never the daemon's heap.
func (d *Daemon) startWorker() {
	if d.cfg.RenderInProcess {
		return
	}
	w := render.NewWorker()
	d.worker = w
	d.metrics.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_render_worker_peak_rss_bytes",
			Help: "Peak resident set size of the last render worker (the child process running kustomize), as it measured its own."},
			func() float64 { return float64(w.PeakRSS()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_render_workers_total",
			Help: "Render worker processes started (one per render the render cache could not answer)."},
			func() float64 { return float64(w.Started()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_render_workers_queued",
			Help: "Renders waiting for the running render worker to finish (one runs at a time)."},
			func() float64 { return float64(w.Queued()) }))
}

// auditAll audits every env in full; an env that fails keeps its last report and the others go on.
// The daemon is ready once every env has a report or an error of its own, such as a commit that
// does not render (its status's error): that holds up no other env's audit, nor the pod's
// readiness. An error of the cluster's API (unreachable, forbidden, not synced) is the daemon's:
// it stays unready until an audit gets through.
func (d *Daemon) auditAll(ctx context.Context) {
	d.takeTouched() // a full audit covers what the watches saw so far, and announces it all
	d.lastFull = time.Now()
	d.eachEnv(ctx, func(a *audit.Auditor, env string) (*drift.Report, error) { return a.Run(ctx, audit.Request{Env: env}) })
	// A full audit decodes every object once more (the render, Argo CD's verdicts): at 10,000
	// objects it allocates ~1 GB, and the pages the heap grew to would otherwise stay resident
	// until the scavenger's slow pace gives them back. Once a fetch interval, one forced GC.
	debug.FreeOSMemory()
}

// DefaultGCPercent is the GOGC `auditor serve` runs with when GOGC is not set.
const DefaultGCPercent = 50

// auditFetched audits after a fetch: an env whose branch head or synced revision moved is
// audited in full (Update sees it), the others only for what the watches touched; every
// ResyncInterval everything is audited in full, which also takes up what no watch reports
// (argocd-cm's customizations when not watched, a CRD's new schema).
func (d *Daemon) auditFetched(ctx context.Context) {
	if time.Since(d.lastFull) >= d.cfg.ResyncInterval.or(5*time.Minute) {
		d.auditAll(ctx)
		return
	}
	d.auditChanged(ctx)
}

// auditChanged audits what the watches saw change: every env in full when a change could not be
// named, else only the touched objects on top of each env's last full audit
// (audit.Auditor.Update, which audits an env in full when it must).
func (d *Daemon) auditChanged(ctx context.Context) {
	refs, full, takenOver := d.takeTouched()
	if takenOver && !full {
		full = !d.announceReports()
	}
	if full {
		d.auditAll(ctx)
		return
	}
	ok := d.eachEnv(ctx, func(a *audit.Auditor, env string) (*drift.Report, error) {
		if d.isWaiting(env) {
			return a.Run(ctx, audit.Request{Env: env})
		}
		return a.Update(ctx, env, refs)
	})
	if !ok && ctx.Err() == nil {
		// What failed to be audited stays touched: the next audit (event or fetch) takes it again.
		d.touchMu.Lock()
		d.full = true
		d.touchMu.Unlock()
	}
}

// announceReports announces each env's current report, once this replica leads: it audited
// every watch event as a follower too, so they say what stands (what the watches delivered
// since is audited next). It says whether every env had one; an env without (its audit failed)
// needs a full audit.
func (d *Daemon) announceReports() bool {
	d.mu.RLock()
	reps := make([]*drift.Report, 0, len(d.cfg.Envs))
	all := true
	for _, env := range d.cfg.Envs {
		if rep := d.reports[env]; rep != nil && d.errs[env] == nil {
			reps = append(reps, rep)
		} else {
			all = false
		}
	}
	d.mu.RUnlock()
	for _, rep := range reps {
		d.announce(rep)
	}
	return all
}

// eachEnv audits every env with run, records and announces each report, subscribes to the
// informers the audits started, and gives back the memory of a render kustomize just made. It
// says whether every env's audit succeeded.
func (d *Daemon) eachEnv(ctx context.Context, run func(a *audit.Auditor, env string) (*drift.Report, error)) bool {
	d.dropCaches()
	d.mu.RLock()
	repo, c := d.repo, d.cache
	d.mu.RUnlock()
	a := d.auditorFor(repo, c)
	allOK := true
	for _, env := range d.cfg.Envs {
		start := time.Now()
		a.Options.Controllers = d.cfg.controllersFor(env)
		rep, err := run(a, env)
		allOK = d.audited(ctx, env, rep, err, start) && allOK
	}
	if ctx.Err() == nil && d.envsSettled() {
		d.ready.Store(true) // see auditAll
	}
	d.hookInformers(c)
	if d.fleet != nil {
		for _, fc := range d.fleet.Caches() {
			d.hookInformers(fc)
		}
	}
	if rendered := a.Renders.Stats().Rendered; rendered != d.rendered {
		// A render was decoded and cached (in process, kustomize built and dropped a whole
		// render: ~1 GiB at 10,000 objects): give that memory back to the system now rather than
		// keep the process at its peak.
		d.rendered = rendered
		debug.FreeOSMemory()
	}
	return allOK
}

// audited records one env's audit and announces its report; it says whether the audit succeeded.
// An audit waiting for its render in the background succeeded for this purpose: the env's last
// report stands, and the render's end audits the env again.
func (d *Daemon) audited(ctx context.Context, env string, rep *drift.Report, err error, start time.Time) bool {
	if re, rendering := errors.AsType[*audit.RenderingError](err); rendering {
		// A new revision: the watches' refs in env are dropped, its next audit is full. The
		// same revision rendered again (a resync of an env whose renders the cache does not
		// keep): incremental audits go on meanwhile on the standing report.
		d.mu.RLock()
		rep := d.reports[env]
		d.mu.RUnlock()
		if rep == nil || rep.Revision != re.Revision {
			d.setWaiting(env, true)
		}
		return true
	}
	d.setWaiting(env, false)
	d.metrics.auditDuration.WithLabelValues(env).Observe(time.Since(start).Seconds())
	d.mu.Lock()
	d.errs[env] = err
	if err == nil {
		d.reports[env] = rep
	}
	d.mu.Unlock()
	if err != nil {
		d.metrics.auditErrors.WithLabelValues(env).Inc()
		if ctx.Err() == nil {
			d.log.Error("audit failed", "env", env, "err", err)
		}
		return false
	}
	d.metrics.lastSuccess.WithLabelValues(env).SetToCurrentTime()
	d.metrics.observe(rep)
	d.recordEpisodes(rep)
	d.announce(rep)
	d.recordSync(ctx, rep)
	return true
}

// setWaiting records whether env's full audit waits for a background render.
func (d *Daemon) setWaiting(env string, waiting bool) {
	d.touchMu.Lock()
	defer d.touchMu.Unlock()
	if waiting {
		if d.waiting == nil {
			d.waiting = map[string]bool{}
		}
		d.waiting[env] = true
	} else {
		delete(d.waiting, env)
	}
}

// isWaiting says whether env's last full audit waits for a background render: its next audit
// is full, so that it covers what the watches saw in env meanwhile (whose refs that audit
// dropped), even when the render is no longer needed (the branch moved back).
func (d *Daemon) isWaiting(env string) bool {
	d.touchMu.Lock()
	defer d.touchMu.Unlock()
	return d.waiting[env]
}

// clusters resolves the destinations of Applications on other clusters (nil without a fleet).
func (d *Daemon) clusters() func(ctx context.Context, server, name string) (*live.Cache, string, error) {
	if d.fleet == nil {
		return nil
	}
	return d.fleet.Resolve
}

// ownsFunc is the audits' Owns: nil without sharding, where every replica audits everything.
func (d *Daemon) ownsFunc() func(string) bool {
	if d.sharding == nil {
		return nil
	}
	return d.owns
}

// clusterName names a destination without starting its cluster's cache (nil without a fleet).
func (d *Daemon) clusterName() func(server, name string) (string, bool) {
	if d.fleet == nil {
		return nil
	}
	return d.fleet.Name
}

// envsSettled says whether every env has a report, or an error of its own rather than the
// cluster API's.
func (d *Daemon) envsSettled() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, env := range d.cfg.Envs {
		if err := d.errs[env]; d.reports[env] == nil && (err == nil || apiError(err)) {
			return false
		}
	}
	return true
}

// apiError says whether err came from talking to the cluster's API: the network, a status the
// API server answered with, a cache that never synced.
func apiError(err error) bool {
	var netErr net.Error
	var notSynced *live.NotSyncedError
	return errors.As(err, &netErr) || errors.As(err, &notSynced) || apierrors.ReasonForError(err) != metav1.StatusReasonUnknown ||
		errors.Is(err, context.DeadlineExceeded)
}
