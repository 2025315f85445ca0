// Package daemon runs the drift engine continuously: it watches live objects and re-audits when
// they change, fetches Git on an interval and on a push webhook, and hands new and resolved drift
// to the chat sinks. Only the leader (a Lease) posts; every replica audits and serves HTTP.
package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// Daemon is one running auditor.
type Daemon struct {
	cfg     *Config
	rest    *rest.Config
	log     *slog.Logger
	metrics *metrics

	// The parts: each owns its state and its lock.
	git  *gitSource // the repository, fetched outside the audits
	conn *liveConn  // Argo CD's cluster: the live cache and the Auditor made of it
	// layout is the repository's layout at the branch head.
	layout *repoLayout
	*auditWork
	*renderParts
	*deliveryParts
	*webParts
	*replicaParts
}

// newDaemon is a Daemon of cfg with its parts made and nothing opened.
func newDaemon(cfg *Config, restCfg *rest.Config, log *slog.Logger) *Daemon {
	return &Daemon{cfg: cfg, rest: restCfg, log: log, metrics: newMetrics(), conn: &liveConn{},
		auditWork:     &auditWork{envs: newEnvStates()},
		renderParts:   &renderParts{},
		deliveryParts: &deliveryParts{trackerState: &stateFile{path: filepath.Join(cfg.StateDir, "drift-state.json")}},
		webParts:      &webParts{listening: make(chan struct{}), admissionListening: make(chan struct{})},
		replicaParts:  &replicaParts{connected: make(chan struct{})}}
}

// New prepares a daemon: sinks, outboxes and the tracker state are opened; nothing runs yet.
func New(cfg *Config, restCfg *rest.Config, log *slog.Logger) (*Daemon, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg.withDefaults() // a Config made in code, not read by LoadConfig
	d := newDaemon(cfg, restCfg, log)
	d.git = newGitSource(d.openRepo, cfg.FetchTimeout.Duration, d.gitFetched)
	d.layout = newRepoLayout(d.git.Repo, log, cfg.byConvention)
	d.hooks, d.waits, d.lead = newInformerHooks(d.hook), newPeopleWaits(d.peopleOn), newLeadership(d.leaderChanged)
	d.queue, d.ledgerWriter = d.newQueue(), newLedgerWriter()
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if cfg.LeaderElection.Shard {
		d.sharding = &sharding{owned: map[string]bool{}, names: cfg.shardNames()}
	}
	if w := cfg.Webhook; w != nil && (w.SecretFile != "" || w.SecretEnv != "") {
		s, err := sinks.ReadSecret("git webhook secret", w.SecretFile, w.SecretEnv)
		if err != nil {
			return nil, err
		}
		d.secret = s
	}
	authorize, err := apiAuth(cfg.API, restCfg)
	if err != nil {
		return nil, err
	}
	d.authorize = authorize
	if cfg.RepoServer != nil {
		if d.repoServer, err = reposerver.New(*cfg.RepoServer); err != nil {
			return nil, err
		}
	}
	if err := d.startFleet(cfg); err != nil {
		return nil, err
	}
	d.registerGauges()
	d.startWorker()
	d.adoptRenders, d.ledger = d.renderCache(2), d.renderCache(2)
	d.adoptRenders.Urgent = true // its walks run inside the audits: they must not queue behind a blame walk
	d.blames = d.blameHandler()
	d.registerAuditCounters()
	key, err := drift.InstallKey(filepath.Join(cfg.StateDir, "secret-hmac.key"))
	if err != nil {
		return nil, err
	}
	d.hmacKey = key
	if d.episodes, err = loadEpisodes(cfg); err != nil {
		return nil, err
	}
	d.tracker = notify.NewTracker()
	if data, err := os.ReadFile(d.trackerState.path); err == nil {
		if err := json.Unmarshal(data, d.tracker); err != nil {
			return nil, fmt.Errorf("drift state %s: %w", d.trackerState.path, err)
		}
	}
	outboxes, err := d.openSinks(cfg, log)
	if err != nil {
		return nil, err
	}
	d.outboxes = outboxes
	d.identity = leaderIdentity(cfg.LeaderElection)
	if cfg.AuditEvents.enabled() || slices.ContainsFunc(cfg.Clusters, func(c fleet.Cluster) bool { return c.AuditLog != "" }) {
		d.people = auditlog.NewStore(cfg.AuditEvents.Max)
		d.waits.unnamed = d.people.ViaArgoCDServer
	}
	switch {
	case d.sharding != nil:
		if err := d.newSharding(); err != nil {
			return nil, err
		}
	case cfg.LeaderElection.Enabled:
		if err := d.shareRecords(); err != nil {
			return nil, err
		}
	}
	d.notifier = d.newNotifier(cfg, log, outboxes)
	return d, nil
}

// startFleet starts the watches of cfg's other clusters, each scoped to the namespaces cfg
// watches unless it names its own, and registers their reachability.
func (d *Daemon) startFleet(cfg *Config) error {
	var err error
	if len(cfg.Clusters) > 0 {
		clusters := slices.Clone(cfg.Clusters)
		for i := range clusters {
			if len(clusters[i].WatchNamespaces) == 0 { // scoped as on Argo CD's cluster
				clusters[i].WatchNamespaces = cfg.WatchNamespaces
			}
		}
		fctx, stop := context.WithCancel(context.Background())
		if d.fleet, err = fleet.New(fctx, clusters); err != nil {
			stop()
			return err
		}
		d.stopFleet = stop
		d.fleet.OnInformer = d.hooks.starting
		if d.sharding != nil {
			d.fleet.Probes = d.owns // each replica probes the clusters it audits
		}
		d.metrics.reg.MustRegister(newReachability(d.fleet, d.owns))
	}
	return nil
}

// registerGauges registers the gauges of the audit queue's depth and of the render engine.
func (d *Daemon) registerGauges() {
	d.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_audit_queue_depth",
		Help: "Envs waiting for an audit in the work queue (a pause after a failure is not counted)."},
		func() float64 { return float64(d.queue.Len()) }))
	engine := d.renderEngine()
	d.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_render_engine",
		Help:        "How Applications are rendered: 1 for the engine named by the label (repo-server: Argo CD's; in-process).",
		ConstLabels: prometheus.Labels{"engine": engine}}, func() float64 { return 1 }))
}

// registerAuditCounters registers the counters of watch starts, of audits by mode and of
// Applications audited again alone.
func (d *Daemon) registerAuditCounters() {
	d.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_watch_starts_total",
		Help: "Watch requests the informers made: one per kind, then one per reconnect."}, func() float64 {
		c := d.conn.Cache()
		if c == nil {
			return 0
		}
		return float64(c.WatchStarts())
	}))
	for _, mode := range []string{"full", "incremental"} {
		d.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_audits_total",
			Help:        "Audits by mode: full (render, every object) or incremental (the objects a watch event touched).",
			ConstLabels: prometheus.Labels{"mode": mode}}, func() float64 {
			a := d.conn.Current()
			if a == nil {
				return 0
			}
			full, incr := a.Counts()
			if mode == "full" {
				return float64(full)
			}
			return float64(incr)
		}))
	}
	d.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_applications_audited_alone_total",
		Help: "Applications of a group audited again alone (rendered and compared) when their own desired state moved."}, func() float64 {
		if a := d.conn.Current(); a != nil {
			return float64(a.AloneAudits())
		}
		return 0
	}))
}

// openSinks opens the outbox of each of cfg's sinks and starts a dispatcher for it.
func (d *Daemon) openSinks(cfg *Config, log *slog.Logger) ([]*outbox.Outbox, error) {
	var outboxes []*outbox.Outbox
	for _, sc := range cfg.Sinks {
		sink, err := newSink(sc)
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		ob, err := outbox.OpenOutbox(filepath.Join(cfg.StateDir, "outbox", sc.Name), cfg.OutboxMax)
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		outboxes = append(outboxes, ob)
		dc := outbox.DispatcherConfig{BackoffBase: cfg.Dispatch.BackoffBase.Duration,
			BackoffMax: cfg.Dispatch.BackoffMax.Duration, Rate: cfg.Dispatch.Rate, Burst: cfg.Dispatch.Burst, Logger: log,
			Paused: func() bool { return !d.lead.Leading() }}
		if d.sharding != nil { // each replica posts for its shards
			dc.Paused, dc.Claim = nil, d.claim
		}
		disp := outbox.NewDispatcher(sink, ob, dc)
		d.dispatchers = append(d.dispatchers, disp)
		d.metrics.sinkMetrics(sc.Name, disp)
	}
	return outboxes, nil
}

// newNotifier is the notifier of the daemon's audits, posting to outboxes under the audits' names.
func (d *Daemon) newNotifier(cfg *Config, log *slog.Logger, outboxes []*outbox.Outbox) *notify.Notifier {
	var names audit.Config // the audits' names: the layout's at the branch head, the config's
	d.naming(&names)
	opts := notify.Options{ArgoCDURL: cfg.ArgoCDURL, AppName: func(env string) string {
		if app := names.AppName(env); app != "" {
			return app
		}
		return names.RootName(env) // the env's link goes to its root
	},
		ReadFile: d.readFile}
	return notify.NewNotifier(notify.NotifierConfig{Window: cfg.FoldWindow.Duration, Options: opts,
		Outboxes: outboxes, Tracker: d.tracker, Logger: log, Leading: true, OnEnqueued: d.saveTracker, Resolve: d.resolve})
}

// Run audits until ctx ends, then flushes and stops every goroutine it started. Its parts run
// as one group (lifecycle.Group): the HTTP server, the audit-log followers, leader election and
// the shard membership, the audits (a reconcile queue keyed by env), the Git fetches, the
// clusters' probes and the schedules; the first that fails stops the others.
func (d *Daemon) Run(ctx context.Context) error {
	if !d.cfg.LeaderElection.Enabled {
		d.lead.Gain(ctx)
		d.lead.Decide()
	}
	return d.parts().Run(ctx)
}
