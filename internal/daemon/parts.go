package daemon

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/daemon/lifecycle"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
	"github.com/llm-gitops/platform/internal/daemon/reconcile"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// auditWork is the auditing: each env's last audit, the work asked of the next, what the audits
// subscribed to and the people behind their drift.
type auditWork struct {
	envs   *envStates                     // each env's last audit
	queue  *reconcile.Queue[string, work] // the work asked of each env's next audit
	hooks  *informerHooks                 // the informers the audits subscribed to
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
	// admissionAddr is where the admission webhook listens, once admissionListening is closed.
	admissionAddr      string
	admissionListening chan struct{}
	ready              atomic.Bool
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

// parts are the daemon's long-running parts, as one group.
func (d *Daemon) parts() *lifecycle.Group {
	g := lifecycle.NewGroup(d.log)
	g.Add("http", d.serveHTTP)
	if d.people != nil && d.cfg.AuditEvents.Admission != nil {
		g.Add("admission webhook", d.serveAdmission)
	}
	if d.people != nil {
		g.Add("Argo CD's records", d.followArgoCD)
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
