package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/engine/audit"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
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

// ledgerWriter appends the ledger in the background, one env's sync at a time (they share
// one clone on disk, git/ledger), and remembers each env's revision already written.
type ledgerWriter struct {
	mu   sync.Mutex
	seen map[string]string // env -> revision whose ledger records are written
	busy map[string]bool
	git  sync.Mutex // held by a sync: serialises the use of the clone
	wg   sync.WaitGroup
}

func newLedgerWriter() *ledgerWriter {
	return &ledgerWriter{seen: map[string]string{}, busy: map[string]bool{}}
}

// start runs sync for env's revision in the background unless it is written or being written;
// a failure is logged by sync's caller and retried at the next start.
func (w *ledgerWriter) start(env, revision string, sync func() error) {
	w.mu.Lock()
	if w.seen[env] == revision || w.busy[env] {
		w.mu.Unlock()
		return
	}
	w.busy[env] = true
	w.mu.Unlock()
	w.wg.Go(func() {
		w.git.Lock()
		err := sync()
		w.git.Unlock()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.busy[env] = false
		if err == nil {
			w.seen[env] = revision
		}
	})
}

// wait waits for the syncs started.
func (w *ledgerWriter) wait() { w.wg.Wait() }

// recordSync appends the ledger when rep's revision is newly synced (one replica, in the
// background; a failure is logged and retried at the next audit).
func (d *Daemon) recordSync(ctx context.Context, rep *drift.Report) {
	if !d.cfg.Ledger.Enabled || !d.writesLedger() {
		return
	}
	seenAt := time.Now().UTC()
	d.ledgerWriter.start(rep.Env, rep.Revision, func() error {
		err := d.syncLedger(ctx, rep.Env, rep.Revision, seenAt)
		if err != nil && ctx.Err() == nil {
			d.log.Error("ledger not updated; retried at the next audit", "env", rep.Env, "revision", rep.Revision, "err", err)
		}
		return err
	})
}

func (d *Daemon) syncLedger(ctx context.Context, env, revision string, seenAt time.Time) error {
	remote, err := gitrepo.NewRemote(d.onDisk(d.cfg.Ledger.Remote, "ledger"))
	if err != nil {
		return err
	}
	req := ledger.SyncRequest{Env: env, Branch: d.cfg.Ledger.Branch, Revision: revision, SyncedAt: seenAt,
		Deadline: time.Now().Add(2 * time.Minute), FetchTimeout: d.cfg.FetchTimeout.Duration, Renders: d.ledger}
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
	return d.lead.Leading()
}
