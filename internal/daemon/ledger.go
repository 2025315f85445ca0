package daemon

import (
	"context"
	"time"

	"github.com/llm-gitops/platform/internal/audit"

	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/ledger"
)

// LedgerConfig turns on the model ledger: when an env's synced revision changes, the records of
// the commits up to it are appended to clusters/<env>/model-ledger.jsonl, stamped with the time
// the revision was first seen synced live, with a metrics snapshot when Prometheus is set.
type LedgerConfig struct {
	Enabled bool `json:"enabled"`
	// Branch the ledger commits go to (default main).
	Branch string `json:"branch,omitempty"`
	// Remote is where ledger commits are pushed, credentials from files.
	Remote gitrepo.RemoteConfig `json:"remote"`
	// PrometheusURL, when set, adds p50/p95 latency, TTFT and error rate per model version.
	PrometheusURL string `json:"prometheusURL,omitempty"`
}

// recordSync appends the ledger when rep's revision is newly synced (one replica, in the
// background; a failure is logged and retried at the next audit).
func (d *Daemon) recordSync(ctx context.Context, rep *drift.Report) {
	if !d.cfg.Ledger.Enabled || !d.writesLedger() {
		return
	}
	d.mu.Lock()
	if d.ledgerSeen[rep.Env] == rep.Revision || d.ledgerBusy[rep.Env] {
		d.mu.Unlock()
		return
	}
	d.ledgerBusy[rep.Env] = true
	d.mu.Unlock()
	seenAt := time.Now().UTC()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		err := d.syncLedger(ctx, rep.Env, rep.Revision, seenAt)
		d.mu.Lock()
		d.ledgerBusy[rep.Env] = false
		if err == nil {
			d.ledgerSeen[rep.Env] = rep.Revision
		}
		d.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			d.log.Error("ledger not updated; retried at the next audit", "env", rep.Env, "revision", rep.Revision, "err", err)
		}
	}()
}

func (d *Daemon) syncLedger(ctx context.Context, env, revision string, seenAt time.Time) error {
	// The envs' syncs share one clone on disk (git/ledger): one at a time.
	d.ledgerGit.Lock()
	defer d.ledgerGit.Unlock()
	remote, err := gitrepo.NewRemote(d.onDisk(d.cfg.Ledger.Remote, "ledger"))
	if err != nil {
		return err
	}
	req := ledger.SyncRequest{Env: env, Branch: d.cfg.Ledger.Branch, Revision: revision, SyncedAt: seenAt,
		Deadline: time.Now().Add(2 * time.Minute), FetchTimeout: d.cfg.FetchTimeout.or(30 * time.Second), Renders: d.ledger}
	if u := d.cfg.Ledger.PrometheusURL; u != "" {
		req.Metrics = (&ledger.Prometheus{URL: u}).ForRecord
	}
	res, err := ledger.Sync(ctx, remote, req)
	if err != nil {
		return err
	}
	if res.Appended > 0 {
		d.log.Info("ledger updated", "env", env, "revision", revision, "records", res.Appended, "commit", res.Result.Commit)
	}
	return nil
}

// writesLedger says whether this replica appends the ledger: the leader; with shards, the holder
// of Argo CD's own cluster, whose report has each env's revision (its Applications are there).
func (d *Daemon) writesLedger() bool {
	if d.sharding != nil {
		return d.owns(audit.InCluster)
	}
	return d.leader.Load()
}
