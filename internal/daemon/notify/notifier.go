package notify

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/outbox"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Window is the folding window (DefaultFoldWindow when zero).
	Window time.Duration
	// Options shape the messages.
	Options Options
	// Outboxes receive every message, one outbox per sink.
	Outboxes []*outbox.Outbox
	// Leading sends the first drift after a quiet window at once (see Folder.SetLeading).
	Leading bool
	// Tracker holds the drift already seen; a new one when nil. Persist it with json.Marshal.
	Tracker *Tracker
	// Logger receives enqueue failures [discard].
	Logger *slog.Logger
	// OnEnqueued, when set, is called after each batch of messages reached the outboxes (to
	// persist State).
	OnEnqueued func()
	// Resolve, when set, says how a resolved item ended (who set the field back, when), given
	// the revision the report compares with.
	Resolve func(it Item, revision string) *Resolution
}

// Notifier wires the pieces together: each report goes through the Tracker, new and resolved
// items are folded per env, and the resulting messages are enqueued into every outbox (from
// where Dispatchers deliver them).
type Notifier struct {
	tracker    *Tracker
	folder     *Folder
	outboxes   []*outbox.Outbox
	log        *slog.Logger
	onEnqueued func()
	resolve    func(Item, string) *Resolution

	enqueueErrors atomic.Uint64
}

// NewNotifier returns a Notifier; Close it to flush what is being folded.
func NewNotifier(cfg NotifierConfig) *Notifier {
	n := &Notifier{tracker: cfg.Tracker, outboxes: cfg.Outboxes, log: cfg.Logger, onEnqueued: cfg.OnEnqueued, resolve: cfg.Resolve}
	if n.tracker == nil {
		n.tracker = NewTracker()
	}
	if n.log == nil {
		n.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n.folder = NewFolder(cfg.Window, cfg.Options, n.enqueue)
	n.folder.SetLeading(cfg.Leading)
	return n
}

// Tracker returns the tracker, to persist its state.
func (n *Notifier) Tracker() *Tracker { return n.tracker }

// Observe feeds one report in.
func (n *Notifier) Observe(r *drift.Report) error { return n.ObserveIn(r, nil) }

// ObserveIn feeds in one report that speaks only for the items in picks (see
// Tracker.ObserveIn; nil: all).
func (n *Notifier) ObserveIn(r *drift.Report, in func(Item) bool) error {
	added, resolved, err := n.tracker.ObserveIn(r, in)
	if err != nil {
		return fmt.Errorf("notify: notifier: %w", err)
	}
	if n.resolve != nil {
		for i := range resolved {
			resolved[i].Resolution = n.resolve(resolved[i], r.Revision)
		}
	}
	n.folder.Add(r.Env, added, resolved)
	return nil
}

// Flush enqueues what is being folded now.
func (n *Notifier) Flush() { n.folder.Flush() }

// Close flushes and stops folding.
func (n *Notifier) Close() { n.folder.Close() }

// EnqueueErrors returns how many messages could not be written to an outbox.
func (n *Notifier) EnqueueErrors() uint64 { return n.enqueueErrors.Load() }

func (n *Notifier) enqueue(msgs []message.Message) {
	for _, ob := range n.outboxes {
		for _, m := range msgs {
			if err := ob.Enqueue(m); err != nil {
				n.enqueueErrors.Add(1)
				n.log.Error("enqueue message", "outbox", ob.Dir(), "id", m.ID, "err", err)
			}
		}
	}
	if n.onEnqueued != nil {
		n.onEnqueued()
	}
}

// State is the tracker's state as it may be persisted: drift still being folded (in no outbox
// yet) counts as not seen and resolutions not yet enqueued as still there, so a crash inside the
// fold window announces them after the restart instead of losing them.
func (n *Notifier) State() ([]byte, error) {
	added, resolved := n.folder.Unsent()
	var st trackerState
	data, err := json.Marshal(n.tracker)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("notify: notifier state: %w", err)
	}
	unsent := map[string]bool{}
	for _, it := range added {
		unsent[it.Key] = true
	}
	for env, items := range st.Envs {
		kept := items[:0]
		for _, it := range items {
			if !unsent[it.Key] {
				kept = append(kept, it)
			}
		}
		st.Envs[env] = kept
	}
	for _, it := range resolved {
		if st.Envs == nil {
			st.Envs = map[string][]Item{}
		}
		st.Envs[it.Env] = append(st.Envs[it.Env], it)
	}
	return json.Marshal(st)
}
