package daemon

import (
	"context"
	"errors"
	"maps"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/cost"
)

// newAuditor makes the Auditor of repo and the live cache c (liveConn keeps it while both are
// the same, so renders are cached by what they read and the schema by its documents across audits).
func (d *Daemon) newAuditor(repo *gitrepo.Repo, c *live.Cache) *audit.Auditor {
	cfg := audit.Config{
		Repo: repo, Live: c, People: d.people, AppNamespace: d.appNamespace(), Envs: d.cfg.Envs,
		Renders: d.renderCache(2), // the synced revision and the one before: a 10,000-object render is ~9 MiB as JSON
		// A new revision's render runs in the background (in the worker): the queue goes on
		// auditing the other envs meanwhile, and audits this env in full once the render is in,
		// which takes the render up.
		RenderedInBackground: func(env string) { d.queue.Add(env, work{full: true}) },
		RepoServer:           d.repoServer,
		Clusters:             d.clusters(),
		Owns:                 d.ownsFunc(),
		ClusterName:          d.clusterName(),
		Steps:                []drift.Step{cost.Step{}},
		Controllers:          d.cfg.controllersFor, // each env its own rules: nothing is written on the Auditor per audit
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
	d.naming(&cfg)            // the layout at the branch head, the config's roots over it
	cfg.Renders.Urgent = true // an audit's render goes before blame walks', ledger syncs' and the web view's
	return audit.New(cfg)
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

// DefaultGCPercent is the GOGC `auditor serve` runs with when GOGC is not set.
const DefaultGCPercent = 50

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

// apiError says whether err came from talking to the cluster's API: the network, a status the
// API server answered with, a cache that never synced.
func apiError(err error) bool {
	var netErr net.Error
	var notSynced *live.NotSyncedError
	return errors.As(err, &netErr) || errors.As(err, &notSynced) || apierrors.ReasonForError(err) != metav1.StatusReasonUnknown ||
		errors.Is(err, context.DeadlineExceeded)
}
