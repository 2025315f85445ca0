package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

// campaign runs leader election on a Lease until ctx ends; leadership lost is campaigned for again.
func (d *Daemon) campaign(ctx context.Context) error {
	le := d.cfg.LeaderElection
	id := d.identity
	ns, name := le.lease()
	cs, err := kubernetes.NewForConfig(d.rest)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	for ctx.Err() == nil {
		lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Client: cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration,
			RetryPeriod: le.RetryPeriod.Duration,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					d.log.Info("became leader: this replica posts reports", "identity", id)
					d.takeOver(lctx)
				},
				OnStoppedLeading: func() {
					d.log.Info("lost leadership", "identity", id)
					d.lead.Lose()
				},
				OnNewLeader: func(string) {
					d.lead.Decide()
				},
			},
		})
	}
	return nil
}

// lease returns the namespace and name of the leader Lease.
func (le LeaderElectionConfig) lease() (namespace, name string) {
	return le.Namespace, le.Name // withDefaults filled them
}

// shareRecords keeps each sink's delivery record in the leader Lease.
func (d *Daemon) shareRecords() error {
	cs, err := kubernetes.NewForConfig(d.rest)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	ns, name := d.cfg.LeaderElection.lease()
	for i, ob := range d.outboxes {
		ob.ShareRecord(&leaseRecord{leases: cs.CoordinationV1().Leases(ns), name: name, annotation: recordAnnotation + d.cfg.Sinks[i].Name,
			identity: d.identity})
	}
	return nil
}

// takeOver starts posting: it reads what the last leader delivered from the Lease, takes that as
// announced (drift announced to every sink is not announced again; drift gone since is announced
// resolved), and asks every env's audit to announce the rest: the reports this replica made as a
// follower, or a full audit where it has none. Only then is this replica the
// leader for the audits. A record that cannot be read is retried until leadership ends.
func (d *Daemon) takeOver(ctx context.Context) {
	if d.sharding != nil {
		// Drift is posted per shard (acquireShard). The leader fires the schedules: it reads
		// which alerts the last leader posted from the leader Lease.
		if !d.retry(ctx, "read the alerts' delivery record from the Lease", d.loadAlerts) {
			return
		}
		d.lead.Gain(ctx)
		return
	}
	if !d.retry(ctx, "read the delivery record from the Lease", d.loadRecords) {
		return
	}
	// What this replica queued in an earlier leadership and never delivered is not sent: the
	// seeded tracker announces what is still true, against the current report. Alerts stay.
	for i, ob := range d.outboxes {
		n, err := ob.DropPending(func(m message.Message) bool { return !isAlert(m) })
		if err != nil {
			d.log.Error("drop stale messages", "sink", d.cfg.Sinks[i].Name, "err", err)
		} else if n > 0 {
			d.log.Info("dropped messages queued in an earlier leadership", "sink", d.cfg.Sinks[i].Name, "messages", n)
		}
	}
	// Leadership may have ended while the record was read: Gain never overrides a loss.
	if d.lead.Gain(ctx) {
		d.ask(work{announce: true}, false)
	}
}

// isAlert says whether m is a one-off alert (a schedule's), not a drift announcement.
func isAlert(m message.Message) bool {
	for _, k := range m.Keys {
		if strings.HasPrefix(k, alertKeyPrefix) {
			return true
		}
	}
	return false
}

// loadRecords merges each sink's shared record and seeds the tracker with the drift every sink
// was told of.
func (d *Daemon) loadRecords(ctx context.Context) error {
	seed, err := d.announcedEverywhere(ctx, "")
	if err != nil {
		return err
	}
	d.tracker.Seed(seed)
	d.saveTracker()
	d.log.Info("delivery record read from the Lease", "openDrift", len(seed))
	return nil
}

// leaderIdentity is this replica's name in the Lease: the configured identity, else $POD_NAME,
// else host name and pid.
func leaderIdentity(le LeaderElectionConfig) string {
	if le.Identity != "" {
		return le.Identity
	}
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// leaderChanged wakes the dispatchers (a follower's wait, or a leader's post) and sets the metric.
func (d *Daemon) leaderChanged(on bool) {
	for _, disp := range d.dispatchers {
		disp.Wake()
	}
	if on {
		d.metrics.leader.Set(1)
	} else {
		d.metrics.leader.Set(0)
	}
}

// loadAlerts reads each sink's record of the alerts the last leader posted (with shards, the
// leader Lease keeps only those).
func (d *Daemon) loadAlerts(ctx context.Context) error {
	for _, ob := range d.outboxes {
		if err := ob.LoadShard(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

// retry runs f until it succeeds, logging each failure as what, with a growing pause (at most
// 5 s); it says false when ctx ended first.
func (d *Daemon) retry(ctx context.Context, what string, f func(context.Context) error) bool {
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return true
		}
		d.log.Error(what, "err", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(time.Duration(attempt)*500*time.Millisecond, 5*time.Second)):
		}
	}
}

// announcedEverywhere loads each sink's shared record of shard ("" without shards) and returns
// the drift every sink was told of, in that shard.
func (d *Daemon) announcedEverywhere(ctx context.Context, shard string) ([]string, error) {
	common := map[string]int{}
	for _, ob := range d.outboxes {
		if err := ob.LoadShard(ctx, shard); err != nil {
			return nil, err
		}
		for _, k := range ob.AnnouncedDrift() {
			if d.sharding == nil || d.sharding.shardOfKey(k) == shard {
				common[k]++
			}
		}
	}
	var seed []string
	for k, n := range common {
		if n == len(d.outboxes) {
			seed = append(seed, k)
		}
	}
	return seed, nil
}
