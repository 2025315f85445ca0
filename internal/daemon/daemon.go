// Package daemon runs the drift engine continuously: it watches live objects and re-audits when
// they change, fetches Git on an interval and on a push webhook, and hands new and resolved drift
// to the chat sinks. Only the leader (a Lease) posts; every replica audits and serves HTTP.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/daemon/lifecycle"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
	"github.com/llm-gitops/platform/internal/daemon/reconcile"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
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

// auditWork is the auditing: each env's last audit, the work asked of the next, what the audits
// subscribed to and the people behind their drift.
type auditWork struct {
	envs   *envStates                     // each env's last audit
	queue  *reconcile.Queue[string, work] // the work asked of each env's next audit
	hooks  *informerHooks                 // the informers the audits subscribed to (the reconcile worker's alone)
	waits  *peopleWaits                   // reports held back for their people
	people *auditlog.Store                // audit events, when configured
	// appNS is the namespace of the envs' Applications, decided once the repository is open
	// (startLayout, before connected closes).
	appNS   string
	hmacKey []byte // keys the HMACs that stand for Secret values in reports
}

// renderParts are the renders besides the audits' own, and where renders run.
type renderParts struct {
	adoptRenders *render.Cache      // renders of the walks that name adopting commits (audits only)
	ledger       *render.Cache      // renders of the ledger's commits and of the web view's serving state
	ledgerWriter *ledgerWriter      // appends the ledger, in the background
	blames       *blamer            // serves /api/v1/blame, with its own renders
	worker       *render.Worker     // runs the audits' renders in a child process; nil with RenderInProcess
	repoServer   *reposerver.Client // renders by Argo CD's repo-server; nil renders in process
	rendered     atomic.Int64       // renders kustomize ran, as of the last audit
	freeMemory   atomic.Bool        // a full audit ran: the heap's free pages go back once the queue is idle
}

// deliveryParts take drift to chat: the tracker of what was announced, the notifier, the
// outboxes and their dispatchers, and the episodes.
type deliveryParts struct {
	outboxes     []*outbox.Outbox
	tracker      *notify.Tracker
	trackerState *stateFile // what has been announced, saved
	notifier     *notify.Notifier
	dispatchers  []*outbox.Dispatcher
	episodes     *episode.Book // drift episodes, saved in the state dir
}

// webParts serve HTTP: the Git webhook's secret, the API's authorization, the address.
type webParts struct {
	secret    string
	authorize func(*http.Request) (int, string)
	addr      string
	listening chan struct{}
	ready     atomic.Bool
}

// replicaParts say what this replica is among others and which clusters it reads: its name,
// its leadership, the shards it holds, the fleet.
type replicaParts struct {
	identity  string        // this replica's name in the Lease
	connected chan struct{} // closed once Git and the cluster are open
	lead      *leadership   // whether this replica leads, and whether the first leader is known
	// sharding is how replicas share the work (leaderElection.shard); nil: every replica
	// audits everything, and the leader posts.
	sharding  *sharding
	fleet     *fleet.Fleet       // the clusters besides Argo CD's own; nil without
	stopFleet context.CancelFunc // ends the fleet's informers
}

// newDaemon is a Daemon of cfg with its parts made and nothing opened.
func newDaemon(cfg *Config, restCfg *rest.Config, log *slog.Logger) *Daemon {
	return &Daemon{cfg: cfg, rest: restCfg, log: log, metrics: newMetrics(), conn: &liveConn{},
		auditWork:     &auditWork{envs: newEnvStates()},
		renderParts:   &renderParts{},
		deliveryParts: &deliveryParts{trackerState: &stateFile{path: filepath.Join(cfg.StateDir, "drift-state.json")}},
		webParts:      &webParts{listening: make(chan struct{})},
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
			return nil, err
		}
		d.stopFleet = stop
		if d.sharding != nil {
			d.fleet.Probes = d.owns // each replica probes the clusters it audits
		}
		d.metrics.reg.MustRegister(newReachability(d.fleet, d.owns))
	}
	d.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_audit_queue_depth",
		Help: "Envs waiting for an audit in the work queue (a pause after a failure is not counted)."},
		func() float64 { return float64(d.queue.Len()) }))
	engine := d.renderEngine()
	d.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_render_engine",
		Help:        "How Applications are rendered: 1 for the engine named by the label (repo-server: Argo CD's; in-process).",
		ConstLabels: prometheus.Labels{"engine": engine}}, func() float64 { return 1 }))
	d.startWorker()
	d.adoptRenders, d.ledger = d.renderCache(2), d.renderCache(2)
	d.adoptRenders.Urgent = true // its walks run inside the audits: they must not queue behind a blame walk
	d.blames = d.blameHandler()
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
	d.outboxes = outboxes
	d.identity = leaderIdentity(cfg.LeaderElection)
	if cfg.AuditEvents.enabled() || slices.ContainsFunc(cfg.Clusters, func(c fleet.Cluster) bool { return c.AuditLog != "" }) {
		d.people = auditlog.NewStore(cfg.AuditEvents.Max)
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
	var names audit.Config // the audits' names: the layout's at the branch head, the config's
	d.naming(&names)
	opts := notify.Options{ArgoCDURL: cfg.ArgoCDURL, AppName: func(env string) string {
		if app := names.AppName(env); app != "" {
			return app
		}
		return names.RootName(env) // the env's link goes to its root
	},
		ReadFile: d.readFile}
	d.notifier = notify.NewNotifier(notify.NotifierConfig{Window: cfg.FoldWindow.Duration, Options: opts,
		Outboxes: outboxes, Tracker: d.tracker, Logger: log, Leading: true, OnEnqueued: d.saveTracker, Resolve: d.resolve})
	return d, nil
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

// parts are the daemon's long-running parts, as one group.
func (d *Daemon) parts() *lifecycle.Group {
	g := lifecycle.NewGroup(d.log)
	g.Add("http", d.serveHTTP)
	if d.people != nil {
		logs := []auditlog.File{{Path: d.cfg.AuditEvents.File}}
		for _, c := range d.cfg.Clusters {
			logs = append(logs, auditlog.File{Path: c.AuditLog, Cluster: c.Name}) // the people behind edits on that cluster
		}
		for _, f := range logs {
			if f.Path == "" {
				continue
			}
			g.Add("audit log "+f.Path, func(ctx context.Context) error {
				f.Follow(ctx, d.people, time.Second, func(err error) { d.log.Warn("read audit log", "file", f.Path, "err", err) })
				return nil
			})
		}
	}
	if d.cfg.LeaderElection.Enabled {
		g.Add("leader election", d.campaign)
		if d.sharding != nil {
			g.Add("shard membership", func(ctx context.Context) error { d.sharding.sharder.Run(ctx); return nil })
		}
	}
	g.Add("audits", d.runAudits)
	g.Add("git fetch", d.fetchLoop)
	if d.fleet != nil {
		g.Add("cluster probes", func(ctx context.Context) error {
			d.fleet.Watch(ctx, 5*time.Second, func(st fleet.Status) {
				d.log.Warn("cluster reachability changed", "cluster", st.Name, "reachable", st.Reachable, "err", st.Error)
				d.markFull() // its Applications are audited again (or said not audited)
			})
			return nil
		})
	}
	if d.cfg.Schedule.Enabled {
		g.Add("schedules", func(ctx context.Context) error { d.runSchedules(ctx); return nil })
	}
	// Once every part has returned, in this order: the ledger's last commit lands; the member
	// clusters' caches end; the announcements still folding are queued in the outboxes (on disk:
	// posted after a restart) and the dispatchers stop, what they had not posted staying queued; the
	// cluster cache's informers end.
	g.OnStop("cluster cache", d.conn.Close)
	g.OnStop("delivery", func() {
		d.notifier.Close()
		for _, disp := range d.dispatchers {
			disp.Close()
		}
	})
	if d.fleet != nil {
		g.OnStop("clusters' caches", d.stopFleet)
	}
	g.OnStop("ledger", d.ledgerWriter.wait)
	return g
}

// connect opens the repository and the cluster, retrying while either is unreachable.
func (d *Daemon) connect(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := d.tryConnect(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, errRefused) {
			return err // the config and the repository disagree: no retry mends that
		}
		d.log.Error("connect", "err", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 30*time.Second)):
		}
	}
}

func (d *Daemon) tryConnect(ctx context.Context) error {
	if err := d.git.Open(ctx); err != nil {
		return err
	}
	if err := d.startLayout(); err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	// The cache's informers live as long as its context: a connect that fails past this point
	// stops them instead of leaving them running beside the next attempt's.
	cctx, stop := context.WithCancel(ctx)
	c, err := live.New(cctx, d.rest)
	if err != nil {
		stop()
		return err
	}
	// Applications are read only in Argo CD's namespaces, where Argo CD reconciles them (its
	// Role there is all the auditor needs for them); scoped, namespaced kinds (Secrets included)
	// only where the envs live.
	c.ScopeTo(d.cfg.WatchNamespaces, map[schema.GroupVersionKind][]string{
		argocd.ApplicationGVK: append([]string{d.appNamespace()}, d.cfg.AppNamespaces...)})
	// Applications change when Argo CD syncs: a new synced revision is a reason to re-audit.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Watch(wctx, nil, []schema.GroupVersionKind{argocd.ApplicationGVK}); err != nil {
		stop()
		return err
	}
	d.conn.set(c, stop)
	return nil
}

// errRefused marks an error of connect that no retry mends: the daemon does not start.
var errRefused = errors.New("refused to start")

// Status is the daemon's state for GET /api/v1/status.
type Status struct {
	Ready  bool              `json:"ready"`
	Leader bool              `json:"leader"`
	Envs   []EnvStatus       `json:"envs"`
	Git    GitStatus         `json:"git"`
	Sinks  map[string]string `json:"sinks,omitempty"`
	// RenderEngine says how Applications are rendered: repo-server (Argo CD's) or in-process.
	RenderEngine string `json:"renderEngine"`
	// Clusters are the clusters besides Argo CD's own, each reachable or not: with shards, those
	// this replica audits (and probes).
	Clusters []fleet.Status `json:"clusters,omitempty"`
	// Shards are the clusters this replica audits and posts for, and Members the replicas that
	// share the work, when they do.
	Shards    []string  `json:"shards,omitempty"`
	Members   []string  `json:"members,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// EnvStatus is one env's last audit. Revision is the commit audited: the one Argo CD synced when
// the env has an Application, else the env's release pin or branch head. HeadRevision, when it
// differs, is what Git says the env should run (the Application's target branch head, or the
// pin): a commit not synced yet, PendingSync when it descends from Revision. Rendering is the
// revision the env's next full audit is rendering in the background: the report is Revision's
// until that render is in.
type EnvStatus struct {
	Env          string `json:"env"`
	Revision     string `json:"revision,omitempty"`
	HeadRevision string `json:"headRevision,omitempty"`
	PendingSync  bool   `json:"pendingSync,omitempty"`
	Rendering    string `json:"rendering,omitempty"`
	InSync       bool   `json:"inSync"`
	Drifted      int    `json:"driftedObjects"`
	Error        string `json:"error,omitempty"`
	// LayoutError says why the repository's layout at the branch head is not used (it does not
	// parse, or moves the envs to another namespace): the audits use the last good one, or fail
	// with this error while there is none.
	LayoutError string `json:"layoutError,omitempty"`
	// Applications are the env's Applications in its last report, each with the engine that
	// rendered it.
	Applications []AppStatus `json:"applications,omitempty"`
}

// AppStatus is one Application of an env's last report: which engine rendered it
// (drift.Application.Renderer), or why it was not audited.
type AppStatus struct {
	Name     string `json:"name"`
	Cluster  string `json:"cluster,omitempty"`
	Renderer string `json:"renderer,omitempty"`
	Error    string `json:"error,omitempty"`
}

// GitStatus says how fresh the audited Git state is.
type GitStatus struct {
	LastFetch    time.Time `json:"lastFetch"`
	StaleSeconds float64   `json:"staleSeconds"`
	Error        string    `json:"error,omitempty"`
}
