package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

// DefaultOutboxMax bounds an Outbox when OpenOutbox is given no bound.
const DefaultOutboxMax = 1000

// maxDelivered bounds the remembered dedupe keys; the oldest are forgotten first.
const maxDelivered = 20000

const (
	deliveredFile = "delivered.json"
	msgPrefix     = "msg-"
	deadDir       = "dead"
)

// Outbox is a bounded, durable queue of messages for one sink: a directory holding one JSON
// file per pending message (written atomically: temp file, fsync, rename), so a new Outbox on
// the same directory sees what an earlier one left. When more than max messages are pending
// the oldest are dropped and counted (Dropped). It also remembers, in delivered.json, which
// dedupe keys were announced and how, so a message repeating an announcement is suppressed.
// An Outbox is safe for concurrent use; one Dispatcher should consume it.
type Outbox struct {
	dir string
	max int

	mu        sync.Mutex
	files     []string // pending message files, oldest first
	ids       map[string]string
	seq       uint64
	delivered map[string]deliveredEntry
	store     func(shard string) RecordStore // the shared record of a shard; nil: none
	shardOf   func(key string) string        // the shard of a dedupe key

	dropped atomic.Uint64
	dead    atomic.Uint64
	notify  chan struct{}
}

// deliveredEntry is how a dedupe key was last announced.
type deliveredEntry struct {
	Kind string    `json:"kind"` // "drift" (drift, digest) or "resolved"
	At   time.Time `json:"at"`
}

// Pending is a message waiting in an Outbox.
type Pending struct {
	Message message.Message
	file    string
}

// OpenOutbox opens (creating it if needed) the outbox in dir, bounded to limit pending messages
// (DefaultOutboxMax when limit <= 0).
func OpenOutbox(dir string, limit int) (*Outbox, error) {
	if limit <= 0 {
		limit = DefaultOutboxMax
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o := &Outbox{dir: dir, max: limit, ids: map[string]string{}, delivered: map[string]deliveredEntry{}, notify: make(chan struct{}, 1)}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".tmp-"):
			_ = os.Remove(filepath.Join(dir, name)) // an interrupted write
		case strings.HasPrefix(name, msgPrefix) && strings.HasSuffix(name, ".json"):
			seq, id, ok := parseMsgName(name)
			if !ok {
				continue
			}
			o.files = append(o.files, name)
			o.ids[id] = name
			o.seq = max(o.seq, seq)
		}
	}
	sort.Strings(o.files) // zero-padded sequence numbers sort in order
	b, err := os.ReadFile(filepath.Join(dir, deliveredFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("outbox: %w", err)
	default:
		var rec map[string]deliveredEntry
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("outbox: decode %s: %w", deliveredFile, err)
		}
		for k, e := range rec { // older records kept the revision in the key
			o.delivered[announceKey(k)] = e
		}
	}
	if len(o.files) > 0 {
		o.signal()
	}
	return o, nil
}

// parseMsgName splits msg-<seq>-<id>.json.
func parseMsgName(name string) (uint64, string, bool) {
	rest := strings.TrimSuffix(strings.TrimPrefix(name, msgPrefix), ".json")
	s, id, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, "", false
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	return seq, id, err == nil
}

// Dir returns the outbox directory.
func (o *Outbox) Dir() string { return o.dir }

// Depth returns the number of pending messages.
func (o *Outbox) Depth() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.files)
}

// Dropped returns how many messages were dropped because the bound was exceeded.
func (o *Outbox) Dropped() uint64 { return o.dropped.Load() }

// DeadLettered returns how many messages were moved to dead/.
func (o *Outbox) DeadLettered() uint64 { return o.dead.Load() }
