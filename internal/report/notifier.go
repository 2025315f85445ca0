package report

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/llm-gitops/platform/internal/drift"
)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Window is the folding window (DefaultFoldWindow when zero).
	Window time.Duration
	// Options shape the messages.
	Options Options
	// Outboxes receive every message, one outbox per sink.
	Outboxes []*Outbox
	// Leading sends the first drift after a quiet window at once (see Folder.SetLeading).
	Leading bool
	// Tracker holds the drift already seen; a new one when nil. Persist it with json.Marshal.
	Tracker *Tracker
	// Logger receives enqueue failures [discard].
	Logger *slog.Logger
}

// Notifier wires the pieces together: each report goes through the Tracker, new and resolved
// items are folded per env, and the resulting messages are enqueued into every outbox (from
// where Dispatchers deliver them).
type Notifier struct {
	tracker  *Tracker
	folder   *Folder
	outboxes []*Outbox
	log      *slog.Logger

	enqueueErrors atomic.Uint64
}

// NewNotifier returns a Notifier; Close it to flush what is being folded.
func NewNotifier(cfg NotifierConfig) *Notifier {
	n := &Notifier{tracker: cfg.Tracker, outboxes: cfg.Outboxes, log: cfg.Logger}
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
func (n *Notifier) Observe(r *drift.Report) error {
	added, resolved, err := n.tracker.Observe(r)
	if err != nil {
		return fmt.Errorf("report: notifier: %w", err)
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

func (n *Notifier) enqueue(msgs []Message) {
	for _, ob := range n.outboxes {
		for _, m := range msgs {
			if err := ob.Enqueue(m); err != nil {
				n.enqueueErrors.Add(1)
				n.log.Error("enqueue message", "outbox", ob.Dir(), "id", m.ID, "err", err)
			}
		}
	}
}
