package daemon

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
	"github.com/llm-gitops/platform/internal/daemon/shard"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// sharding is how replicas share the work (leaderElection.shard): the clusters are shards,
// spread over the replicas by shard.Sharder. A replica audits and posts for the Applications of
// the clusters it holds; what each sink was told of a cluster's drift is kept in that cluster's
// Lease, where its next holder reads it. The leader keeps the rest (schedules, ledger).
type sharding struct {
	sharder *shard.Sharder

	// mu orders the hand-over of a shard against announcing and posting: a report is filtered
	// and observed, and a message posted, under the read lock; a shard is given up under the
	// write lock, so no message of it is in flight once the next holder reads its record.
	mu    sync.RWMutex
	owned map[string]bool
	// now is a copy of owned, replaced under the write lock: the audits, the probes, the status
	// and the metrics read it without waiting behind a hand-over that waits for a slow post.
	now   atomic.Pointer[map[string]bool]
	names []string // the shards
}

// holds says whether this replica holds the shard of cluster: a shard's name, "" for Argo CD's
// own, or a destination no cluster of the config is (the holder of Argo CD's own cluster says
// those are not audited).
func (s *sharding) holds(cluster string) bool {
	now := s.now.Load()
	return now != nil && (*now)[s.canonical(cluster)]
}

// held lists the shards this replica holds, sorted.
func (s *sharding) held() []string {
	if now := s.now.Load(); now != nil {
		return slices.Sorted(maps.Keys(*now))
	}
	return nil
}

// take makes the shard this replica's unless ctx (its holding) ended meanwhile.
func (s *sharding) take(ctx context.Context, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() == nil {
		s.owned[name] = true
		s.published()
	}
}

// give gives the shard up, and runs drop (what the replica keeps of it is dropped) before any
// report or post of it can run again.
func (s *sharding) give(name string, drop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.owned, name)
	s.published()
	drop()
}

// published makes owned, as it is now, what holds and held read (called under the write lock).
func (s *sharding) published() {
	now := maps.Clone(s.owned)
	s.now.Store(&now)
}

// speak runs f with the part of rep this replica speaks for, and which clusters that is (see
// speaks), with no shard handed over meanwhile.
func (s *sharding) speak(rep *drift.Report, f func(part *drift.Report, covered func(cluster string) bool)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f(s.speaks(rep))
}

// claimKeys says whether this replica posts a message of keys: only of the shards it holds and
// renewed lately. A post goes on under the read lock (release releases it): a shard is not
// handed over with a post of it in flight.
func (s *sharding) claimKeys(keys []string) (v outbox.Verdict, release func()) {
	s.mu.RLock()
	for _, k := range keys {
		name := s.canonical(notify.ClusterOfKey(k))
		if !s.owned[name] {
			s.mu.RUnlock()
			return outbox.Drop, nil
		}
		if !s.sharder.Fresh(name) {
			s.mu.RUnlock()
			return outbox.Wait, nil
		}
	}
	return outbox.Post, s.mu.RUnlock
}

// canonical is the shard of cluster: its own, or Argo CD's for a cluster no shard is.
func (s *sharding) canonical(cluster string) string {
	if cluster = shardOf(cluster); !slices.Contains(s.names, cluster) {
		return audit.InCluster
	}
	return cluster
}

// shardNames are the shards: Argo CD's own cluster and each cluster of the config.
func (c *Config) shardNames() []string {
	out := []string{audit.InCluster}
	for _, cl := range c.Clusters {
		out = append(out, cl.Name)
	}
	return out
}

// owns says whether this replica audits the Applications of cluster (a shard's name, or a
// destination no cluster of the config is: those the holder of Argo CD's own cluster reports).
// Without sharding it audits them all.
func (d *Daemon) owns(cluster string) bool {
	if d.sharding == nil {
		return true
	}
	return d.sharding.holds(cluster)
}

// shardOf is the shard of a drift item's cluster ("" for Argo CD's own).
func shardOf(cluster string) string {
	if cluster == "" {
		return audit.InCluster
	}
	return cluster
}

// shardOfKey is the shard a dedupe key belongs to; "" for an alert's, which is the leader's.
func (s *sharding) shardOfKey(key string) string {
	if strings.HasPrefix(key, alertKeyPrefix) {
		return ""
	}
	return s.canonical(notify.ClusterOfKey(key))
}

// inShard picks the tracker items of shard.
func (s *sharding) inShard(name string) func(notify.Item) bool {
	return func(it notify.Item) bool { return s.canonical(it.Object.Cluster) == name }
}

// messageOfShard says whether m announces drift of shard (alerts belong to none).
func (s *sharding) messageOfShard(m message.Message, name string) bool {
	return !isAlert(m) && slices.ContainsFunc(m.Keys, func(k string) bool { return s.shardOfKey(k) == name })
}

// newSharding prepares the shards' Leases and records (d.sharding is made before the
// dispatchers, which ask it); Run starts the Sharder.
func (d *Daemon) newSharding() error {
	le := d.cfg.LeaderElection
	// A client of its own: Lease calls are small and must not queue behind client-go's default
	// 5 requests a second when a replica holds many shards.
	rc := rest.CopyConfig(d.rest)
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ns, group := le.lease()
	leases := cs.CoordinationV1().Leases(ns)
	// What this replica tracked before (its state dir) is not what it holds now: each shard's
	// drift is read from the shard's record when it is acquired.
	d.tracker.Forget(func(notify.Item) bool { return true })
	s := d.sharding
	s.sharder, err = shard.New(shard.Config{Leases: leases, Group: group, Identity: d.identity, Shards: d.cfg.shardNames(),
		LeaseDuration: le.LeaseDuration.Duration, RetryPeriod: le.RetryPeriod.Duration,
		Acquired: d.acquireShard, Release: d.releaseShard, Log: d.log})
	if err != nil {
		return err
	}
	for i, ob := range d.outboxes {
		annotation := recordAnnotation + d.cfg.Sinks[i].Name
		ob.ShareRecords(s.shardOfKey, func(name string) outbox.RecordStore {
			if name == "" { // alerts: the leader's, in its Lease as without shards
				return &leaseRecord{leases: leases, name: group, annotation: annotation, identity: d.identity}
			}
			return &leaseRecord{leases: leases, name: shard.ShardLease(group, name), annotation: annotation, identity: d.identity}
		})
	}
	for _, name := range d.cfg.shardNames() {
		d.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_shard_held",
			Help:        "1 when this replica audits and posts for the cluster (the shard) named by the label.",
			ConstLabels: prometheus.Labels{"shard": name}}, func() float64 {
			if d.owns(name) {
				return 1
			}
			return 0
		}))
	}
	d.metrics.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_shard_members",
			Help: "Replicas sharing the work, as this replica sees their membership Leases."},
			func() float64 { return float64(len(s.sharder.Members())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_shard_moves_total",
			Help: "Shards this replica took or gave up."},
			func() float64 { return float64(s.sharder.Moves()) }))
	return nil
}

// acquireShard makes this replica audit and post for a shard: it reads what the last holder
// told each sink of the shard's drift from the shard's Lease (retried until the shard is lost),
// takes that as announced, drops what it queued for the shard in an earlier holding, and has
// every env audited in full.
func (d *Daemon) acquireShard(ctx context.Context, name string) {
	if !d.retry(ctx, "read the delivery record of shard "+name, func(ctx context.Context) error { return d.loadShard(ctx, name) }) {
		return
	}
	d.sharding.take(ctx, name) // unless Release ran (it cancels ctx after it returns)
	d.log.Info("audits and posts for the shard", "shard", name)
	d.markFull()
}

// loadShard seeds the tracker with the shard's drift every sink was told of, and drops the
// shard's messages queued earlier.
func (d *Daemon) loadShard(ctx context.Context, name string) error {
	seed, err := d.announcedEverywhere(ctx, name)
	if err != nil {
		return err
	}
	d.tracker.Replace(d.sharding.inShard(name), seed)
	d.saveTracker()
	d.dropQueued(name)
	d.log.Info("shard's delivery record read from its Lease", "shard", name, "openDrift", len(seed))
	return nil
}

// dropQueued removes from every outbox the messages of shard not sent yet.
func (d *Daemon) dropQueued(name string) {
	for i, ob := range d.outboxes {
		n, err := ob.DropPending(func(m message.Message) bool { return d.sharding.messageOfShard(m, name) })
		if err != nil {
			d.log.Error("drop queued messages", "sink", d.cfg.Sinks[i].Name, "shard", name, "err", err)
		} else if n > 0 {
			d.log.Info("dropped messages of a shard handed over", "sink", d.cfg.Sinks[i].Name, "shard", name, "messages", n)
		}
	}
}

// releaseShard stops this replica's work on a shard before its next holder takes it: nothing
// more of it is announced or posted (a post in flight finishes first), its queued messages and
// tracked drift are dropped (its next holder announces from the shard's record). The cluster's
// cache is stopped by the next audit (dropCaches), which no audit uses then.
func (d *Daemon) releaseShard(name string) {
	s := d.sharding
	s.give(name, func() {
		d.tracker.Forget(s.inShard(name))
		d.dropQueued(name)
	})
	d.saveTracker()
	// Its open episodes are its next holder's now; the next audit saves the book without them.
	d.episodes.Drop(func(e episode.Episode) bool { return s.canonical(e.Cluster) == name })
	d.log.Info("gave up the shard", "shard", name)
	d.markFull()
}

// dropCaches stops the caches of the member clusters this replica no longer holds, from the
// reconcile worker, between audits: their objects leave the memory.
func (d *Daemon) dropCaches() {
	if d.sharding == nil || d.fleet == nil {
		return
	}
	for name, c := range d.fleet.Caches() {
		if !d.owns(name) {
			d.hooks.forget(c)
			d.fleet.Drop(name)
			d.log.Info("stopped the cache of a cluster another replica audits", "cluster", name)
		}
	}
}

// claim says whether this replica posts m: an alert while it leads (it waits otherwise: the
// leader that made it may lead again), drift only of the shards it holds and renewed lately, so
// that a replica cut off from the API server stops posting before another takes its shards. A
// post goes on under the read lock (done releases it).
func (d *Daemon) claim(m message.Message) (outbox.Verdict, func()) {
	if isAlert(m) {
		if !d.lead.Leading() {
			return outbox.Wait, nil
		}
		return outbox.Post, func() {}
	}
	return d.sharding.claimKeys(m.Keys)
}

// covered says which clusters rep speaks for: those this replica holds whose Applications rep
// audited (called with the read lock held: speak), as they are now: the answer outlives the
// lock, and a shard given up later is still covered by it. A shard acquired after the audit
// began is not covered: its drift is not in rep, and is not resolved by it.
func (s *sharding) covered(rep *drift.Report) func(cluster string) bool {
	in := map[string]bool{}
	for _, app := range rep.Applications {
		if c := s.canonical(app.Cluster); s.owned[c] {
			in[c] = true
		}
	}
	return func(cluster string) bool { return in[s.canonical(cluster)] }
}

// speaks is the part of rep this replica speaks for, and which clusters that is (see covered;
// called with the read lock held: speak). An Application not audited because of its cluster (Unknown,
// on Argo CD's cluster, where Application objects live) is its destination's: the holder of that
// cluster says it, and says when it ends.
func (s *sharding) speaks(rep *drift.Report) (*drift.Report, func(cluster string) bool) {
	dest := map[string]string{} // namespace/name of an Application not audited -> its cluster
	for _, app := range rep.Applications {
		if app.Error != "" && slices.Contains(s.names, app.Cluster) { // a cluster of the config
			name := app.Name[strings.LastIndex(app.Name, "/")+1:]
			dest[app.Namespace+"/"+name] = app.Cluster
		}
	}
	if len(dest) > 0 {
		out := *rep
		out.Objects = slices.Clone(rep.Objects)
		for i, o := range out.Objects {
			if c, ok := dest[o.Namespace+"/"+o.Name]; ok && o.Kind == "Application" && o.Status == drift.Unknown && o.Cluster == "" {
				out.Objects[i].Cluster = c
			}
		}
		rep = &out
	}
	covered := s.covered(rep)
	return part(rep, covered), covered
}

// part is rep with only the objects of the clusters in.
func part(rep *drift.Report, in func(cluster string) bool) *drift.Report {
	if !slices.ContainsFunc(rep.Objects, func(o drift.Object) bool { return !in(o.Cluster) }) {
		return rep
	}
	out := *rep
	out.Objects = slices.DeleteFunc(slices.Clone(rep.Objects), func(o drift.Object) bool { return !in(o.Cluster) })
	out.InSync = len(out.Objects) == 0
	return &out
}
