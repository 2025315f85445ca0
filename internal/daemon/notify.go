package daemon

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/engine/atomicfile"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// resolve says how a resolved item ended: from its episode, else from the watch's copy of the
// object (who set the field back).
func (d *Daemon) resolve(it notify.Item, revision string) *notify.Resolution {
	path := ""
	if f := it.Field(); f != nil {
		path = f.Path
	}
	o := it.Object
	if e, ok := d.episodes.LastEnded(episode.Identity(it.Env, o.Cluster, o.APIVersion, o.Kind, o.Namespace, o.Name, path)); ok {
		return notify.ResolutionOf(e)
	}
	live, ok := d.liveObject(o.Cluster, o.APIVersion, o.Kind, o.Namespace, o.Name)
	if !ok {
		return nil
	}
	return notify.Resolve(it, live, revision)
}

// announce hands a report to the notifier. A follower leaves the tracker alone: what it saw
// was not announced by it, and must be when it leads (it then announces relative to what it
// last announced itself; a duplicate is the price of never losing one).
//
// While Argo CD syncs another revision, nothing is announced: what it has applied so far is
// compared with the old revision and would read as drift, and resolve as soon as it finishes.
// The report after the operation says what stands.
func (d *Daemon) announce(rep *drift.Report) {
	if rep.Syncing() {
		return
	}
	if s := d.sharding; s != nil {
		// Only the shards this replica holds and this report audited, none handed over
		// meanwhile: the tracked drift of a shard taken since the audit began stands until an
		// audit covers it.
		s.speak(rep, func(part *drift.Report, covered func(string) bool) {
			d.observe(part, func(it notify.Item) bool { return covered(it.Object.Cluster) })
		})
		return
	}
	if d.lead.Leading() {
		d.observe(rep, nil)
	}
}

// observe hands the items of rep that in picks (nil: all) to the notifier, unless the report is
// held back for its people, and saves what was announced.
func (d *Daemon) observe(rep *drift.Report, in func(notify.Item) bool) {
	if d.awaitPeople(rep) {
		d.waits.hold(rep)
		return
	}
	held := d.waits.take(rep.Env)
	rep = d.withUnseen(rep)
	if gone := vanished(held, rep); len(gone) > 0 {
		// Drift that came and went while it waited for its person (Argo CD's selfHeal): it is
		// announced, then resolved, like any other.
		seen := *rep
		seen.Objects = append(slices.Clone(rep.Objects), gone...)
		if in != nil { // held before a shard was handed over
			seen.Objects = slices.DeleteFunc(seen.Objects, func(o drift.Object) bool { return !in(notify.Item{Object: o}) })
		}
		if err := d.notifier.ObserveIn(&seen, in); err != nil {
			d.log.Error("track drift", "env", rep.Env, "err", err)
		}
	}
	if err := d.notifier.ObserveIn(rep, in); err != nil {
		d.log.Error("track drift", "env", rep.Env, "err", err)
		return
	}
	d.saveTracker()
}

// saveTracker persists what has been announced: drift still being folded is left out, so it is
// announced after a crash rather than lost. Called after each report and each enqueue.
func (d *Daemon) saveTracker() {
	if err := d.trackerState.save(d.notifier.State); err != nil {
		d.log.Error("save drift state", "err", err)
	}
}

// stateFile is a file of the state directory written whole by several goroutines: one save at
// a time, each of the state as it is when the save begins, so the last save's state is the
// file's. It owns its lock.
type stateFile struct {
	path string

	mu sync.Mutex
}

// save writes what state returns, atomically (a crash leaves the last whole file).
func (f *stateFile) save(state func() ([]byte, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := state()
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	return atomicfile.Write(f.path, data)
}

// withUnseen adds to rep the drift the tracker holds of each Application rep could not audit (its
// cluster unreachable, its source not rendering), as it was announced: a drift nobody can see now
// is not resolved. The auditor carries such drift from its last audit; this covers a restart
// (or a new leader) during the outage, when that audit is gone.
func (d *Daemon) withUnseen(rep *drift.Report) *drift.Report {
	failed := map[string]bool{}
	for _, app := range rep.Applications {
		if app.Error != "" {
			failed[app.Name] = true
		}
	}
	if len(failed) == 0 {
		return rep
	}
	have := map[string]bool{}
	for _, it := range notify.Items(rep) {
		have[message.Identity(it.Key)] = true
	}
	var unseen []drift.Object
	for _, it := range d.tracker.Current(rep.Env) {
		if failed[it.Object.Application] && !have[message.Identity(it.Key)] {
			o := it.Object
			o.Note = strings.TrimPrefix(o.Note+"; "+drift.NotAuditedNowNote, "; ")
			unseen = append(unseen, o)
		}
	}
	if len(unseen) == 0 {
		return rep
	}
	out := *rep
	out.Objects = append(slices.Clone(rep.Objects), unseen...)
	out.InSync = false
	return &out
}
