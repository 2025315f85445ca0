package daemon

import (
	"context"
	"errors"
	"maps"
	"runtime/debug"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/daemon/reconcile"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// work is what an env's next audit is asked to do. The reconcile queue merges the work asked of
// an env until its audit takes it.
type work struct {
	// refs are the objects the watches saw change: re-audited on top of the last full audit.
	refs map[drift.Ref]bool
	// full asks for a full audit (render, every object): a change the watches could not name,
	// a shard or a cluster that came or went, a failed audit, a new revision rendering.
	full bool
	// fetched says a Git fetch ended: a new branch head audits in full (audit.Auditor.Update),
	// and so does an env whose last full audit is older than ResyncInterval.
	fetched bool
	// announce says this replica took over the leadership: the env's standing report is
	// announced (it audited every watch event as a follower too), or the env audited in full.
	announce bool
}

// merge adds b's work to a's; a's refs may be changed, b's are not kept.
func mergeWork(a, b work) work {
	if len(b.refs) > 0 {
		if a.refs == nil {
			a.refs = make(map[drift.Ref]bool, len(b.refs))
		}
		maps.Copy(a.refs, b.refs)
	}
	a.full = a.full || b.full
	a.fetched = a.fetched || b.fetched
	a.announce = a.announce || b.announce
	return a
}

func (w work) empty() bool { return len(w.refs) == 0 && !w.full && !w.fetched && !w.announce }

// newQueue is the daemon's reconcile queue, keyed by env: an env's Applications are audited
// together, since one object can be declared by two of them and an excusal counts across them.
func (d *Daemon) newQueue() *reconcile.Queue[string, work] {
	return reconcile.New(reconcile.Config[string, work]{
		Reconcile: d.reconcileEnv, Merge: mergeWork, Empty: work.empty,
		BaseDelay: time.Second, MaxDelay: d.cfg.FetchInterval.Duration,
		Idle: d.giveBackMemory,
	})
}

// ask asks every env for w, after the debounce when debounced (a burst of watch events is one
// audit per env).
func (d *Daemon) ask(w work, debounced bool) {
	for _, env := range d.cfg.Envs {
		ew := w
		ew.refs = maps.Clone(w.refs) // each env's work is its own: the queue merges into it
		if debounced {
			d.queue.AddAfter(env, ew, d.cfg.Debounce.Duration)
		} else {
			d.queue.Add(env, ew)
		}
	}
}

// touchRef asks for a re-audit of one object.
func (d *Daemon) touchRef(r drift.Ref) { d.ask(work{refs: map[drift.Ref]bool{r: true}}, true) }

// touch records that the watch saw obj of gvk change and asks for a re-audit.
func (d *Daemon) touch(gvk schema.GroupVersionKind, obj any) {
	namespace, name, ok := live.Identity(obj)
	if !ok {
		d.ask(work{full: true}, true) // an object the watch could not name
		return
	}
	d.touchRef(drift.Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: namespace, Name: name})
}

// markFull has every env audited in full next.
func (d *Daemon) markFull() { d.ask(work{full: true}, true) }

// runAudits connects to Git and the cluster, waits for the first leader (a follower must not
// announce, and the leader must not take what it finds at start as announced), audits every
// env in full, then reconciles what the watches, fetches, shards and leadership ask for.
func (d *Daemon) runAudits(ctx context.Context) error {
	if err := d.connect(ctx); err != nil {
		d.queue.ShutDown()
		if ctx.Err() != nil {
			return nil // stopped while still connecting: nothing to audit yet
		}
		return err
	}
	defer d.queue.ShutDown() // stopped before Run: its goroutines end too
	close(d.connected)
	select {
	case <-d.lead.Decided():
	case <-ctx.Done():
		return nil
	}
	d.ask(work{full: true}, false)
	// An env is reconciled by one worker at a time (the queue's guarantee); auditWorkers envs at
	// once share the one Auditor, which nothing writes after New, and the render worker, which
	// runs its renders in turn.
	d.queue.Run(ctx, d.cfg.AuditWorkers)
	return nil
}

// reconcileEnv audits env as w asks, records and announces the report, subscribes to the
// informers the audit started. An error leaves the env's last report standing; the queue
// retries it in full after a pause, and new work for the env runs at once.
func (d *Daemon) reconcileEnv(ctx context.Context, env string, w work) error {
	if w.announce {
		if rep, ok := d.envs.current(env); ok {
			// Announced now, even when a full audit follows: that audit may wait for a
			// background render, or fail, and the new leader must not stay silent meanwhile.
			d.announce(rep)
			w.announce = false
		} else {
			w.full = true // no report to announce: an audit makes one
		}
	}
	if d.layout.refresh(); d.layout.moved(env) {
		w.full = true // the env's Applications may be others now
	}
	if w.fetched && !w.full && d.envs.sinceFull(env) >= d.cfg.ResyncInterval.Duration {
		// Every ResyncInterval, a full audit takes up what no watch reports (argocd-cm's
		// customizations when not watched, a CRD's new schema).
		w.full = true
	}
	if !w.full && len(w.refs) == 0 && !w.fetched {
		return nil // an announcement only
	}
	d.dropCaches()
	c := d.conn.Cache()
	a := d.conn.Auditor(d.git.Repo(), d.newAuditor)
	start := time.Now()
	var rep *drift.Report
	var err error
	switch lerr := d.layout.failing(); {
	case lerr != nil:
		err = lerr // no commit's layout was read: the config's names could be other Applications than the env's
	case w.full:
		d.envs.startFull(env, start)
		rep, err = a.Run(ctx, audit.Request{Env: env})
	default:
		rep, err = a.Update(ctx, env, slices.Collect(maps.Keys(w.refs)))
	}
	audited, err := d.audited(ctx, env, rep, err, start, w.announce)
	if ctx.Err() == nil && d.envs.settled(d.cfg.Envs) {
		// The daemon is ready once every env has a report or an error of its own, such as a
		// commit that does not render (its status's error): that holds up no other env's
		// audit, nor the pod's readiness. An error of the cluster's API (unreachable,
		// forbidden, not synced) is the daemon's: it stays unready until an audit gets through.
		d.ready.Store(true)
	}
	d.hooks.add(c)
	if d.fleet != nil {
		for _, fc := range d.fleet.Caches() {
			d.hooks.add(fc)
		}
	}
	if rendered := int64(a.Renders.Stats().Rendered); audited && w.full || rendered != d.rendered.Load() {
		// A full audit decodes every object once more (the render, Argo CD's verdicts): at
		// 10,000 objects it allocates ~1 GB, and a render decoded in process (kustomize built
		// and dropped a whole render) ~1 GiB more. The heap's pages go back to the system once
		// the queue is idle, rather than stay at the peak until the scavenger's slow pace.
		d.rendered.Store(rendered)
		d.freeMemory.Store(true)
	}
	return err
}

// audited records one env's audit and announces its report; it says whether a report was
// made. An audit waiting for its render in the background succeeded for this purpose: the
// env's last report stands, its next audit is full (parked: the render's end asks for it), and
// that covers what the watches saw meanwhile. A failed audit's error is returned, and its retry
// is full. An announcement owed (a takeover with no report yet) stays owed until a report is made.
func (d *Daemon) audited(ctx context.Context, env string, rep *drift.Report, err error, start time.Time, owed bool) (bool, error) {
	if re, rendering := errors.AsType[*audit.RenderingError](err); rendering {
		// A new revision: the watches' refs in env are dropped, its next audit is full. The
		// same revision rendered again (a resync of an env whose renders the cache does not
		// keep): incremental audits go on meanwhile on the standing report.
		if last, _ := d.envs.report(env); last == nil || last.Revision != re.Revision || owed {
			d.queue.Park(env, work{full: true, announce: owed})
		}
		return false, nil
	}
	d.metrics.auditDuration.WithLabelValues(env).Observe(time.Since(start).Seconds())
	d.envs.record(env, rep, err)
	if err != nil {
		d.metrics.auditErrors.WithLabelValues(env).Inc()
		if ctx.Err() == nil {
			d.log.Error("audit failed", "env", env, "err", err, "retries", d.queue.Retries(env))
		}
		d.queue.Park(env, work{full: true}) // what failed to be audited is audited again, in full
		return false, err
	}
	d.metrics.lastSuccess.WithLabelValues(env).SetToCurrentTime()
	d.metrics.observe(rep)
	d.recordEpisodes(rep)
	d.announce(rep)
	d.recordSync(ctx, rep)
	return true, nil
}

// giveBackMemory returns the heap's free pages to the system after a full audit, once the
// queue has nothing more to do.
func (d *Daemon) giveBackMemory() {
	if d.freeMemory.Swap(false) {
		debug.FreeOSMemory()
	}
}

// fetchLoop fetches Git every FetchInterval and on each push webhook, outside the audits: a
// Git server that stalls a fetch until its timeout holds up no audit of a hand edit. After
// each fetch, failed or not, every env is asked to take it up.
func (d *Daemon) fetchLoop(ctx context.Context) error {
	select {
	case <-d.connected:
	case <-ctx.Done():
		return nil
	}
	d.git.Run(ctx, d.cfg.FetchInterval.Duration, func() { d.ask(work{fetched: true}, false) })
	return nil
}
