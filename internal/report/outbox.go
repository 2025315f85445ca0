package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llm-gitops/platform/internal/atomicfile"
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
	store     RecordStore

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
	Message Message
	file    string
}

// OpenOutbox opens (creating it if needed) the outbox in dir, bounded to limit pending messages
// (DefaultOutboxMax when limit <= 0).
func OpenOutbox(dir string, limit int) (*Outbox, error) {
	if limit <= 0 {
		limit = DefaultOutboxMax
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("report: outbox: %w", err)
	}
	o := &Outbox{dir: dir, max: limit, ids: map[string]string{}, delivered: map[string]deliveredEntry{}, notify: make(chan struct{}, 1)}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("report: outbox: %w", err)
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
		return nil, fmt.Errorf("report: outbox: %w", err)
	default:
		var rec map[string]deliveredEntry
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("report: outbox: decode %s: %w", deliveredFile, err)
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

// Enqueue stores m durably. A message whose ID is already pending is not stored twice. When
// the bound is exceeded the oldest pending messages are dropped and counted.
func (o *Outbox) Enqueue(m Message) error {
	if m.ID == "" {
		return errors.New("report: outbox: message without id")
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("report: outbox: encode: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.ids[m.ID]; ok {
		return nil
	}
	o.seq = max(o.seq+1, uint64(time.Now().UnixNano()))
	name := fmt.Sprintf("%s%020d-%s.json", msgPrefix, o.seq, m.ID)
	if err := atomicfile.Write(filepath.Join(o.dir, name), data); err != nil {
		return fmt.Errorf("report: outbox: %w", err)
	}
	o.files = append(o.files, name)
	o.ids[m.ID] = name
	for len(o.files) > o.max {
		old := o.files[0]
		if err := os.Remove(filepath.Join(o.dir, old)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("report: outbox: drop oldest: %w", err)
		}
		o.forget(old)
		o.dropped.Add(1)
	}
	o.signal()
	return nil
}

// forget removes name from the index; o.mu is held.
func (o *Outbox) forget(name string) {
	for i, f := range o.files {
		if f == name {
			o.files = append(o.files[:i], o.files[i+1:]...)
			break
		}
	}
	if _, id, ok := parseMsgName(name); ok && o.ids[id] == name {
		delete(o.ids, id)
	}
}

func (o *Outbox) signal() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// Ready returns a channel that receives when messages may be pending.
func (o *Outbox) Ready() <-chan struct{} { return o.notify }

// Peek returns the oldest pending message; ok is false when none is pending. An unreadable
// file is moved to the dead/ subdirectory and skipped.
func (o *Outbox) Peek() (p Pending, ok bool, err error) { return o.PeekExcept(nil) }

// PeekExcept is Peek passing over the messages whose ID skip holds (messages a sink rejected,
// waiting for their own retry while the others go out).
func (o *Outbox) PeekExcept(skip map[string]bool) (p Pending, ok bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := 0; i < len(o.files); {
		name := o.files[i]
		data, err := os.ReadFile(filepath.Join(o.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			o.forget(name)
			continue
		}
		if err != nil {
			return Pending{}, false, fmt.Errorf("report: outbox: %w", err)
		}
		var m Message
		if err := json.Unmarshal(data, &m); err != nil {
			if err := o.moveDead(name); err != nil {
				return Pending{}, false, err
			}
			continue
		}
		if skip[m.ID] {
			i++
			continue
		}
		return Pending{Message: m, file: name}, true, nil
	}
	return Pending{}, false, nil
}

// DropPending deletes the pending messages drop selects (unreadable ones are left to Peek) and
// returns how many went.
func (o *Outbox) DropPending(drop func(Message) bool) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, name := range slices.Clone(o.files) {
		data, err := os.ReadFile(filepath.Join(o.dir, name))
		if err != nil {
			continue
		}
		var m Message
		if json.Unmarshal(data, &m) != nil || !drop(m) {
			continue
		}
		if err := os.Remove(filepath.Join(o.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("report: outbox: drop: %w", err)
		}
		o.forget(name)
		n++
	}
	return n, nil
}

// Remove deletes a delivered (or suppressed) message.
func (o *Outbox) Remove(p Pending) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := os.Remove(filepath.Join(o.dir, p.file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("report: outbox: remove: %w", err)
	}
	o.forget(p.file)
	return nil
}

// DeadLetter moves a message the sink keeps rejecting to the dead/ subdirectory, where it is
// kept for inspection instead of blocking the queue.
func (o *Outbox) DeadLetter(p Pending) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.moveDead(p.file)
}

// moveDead moves name to dead/; o.mu is held.
func (o *Outbox) moveDead(name string) error {
	if err := os.MkdirAll(filepath.Join(o.dir, deadDir), 0o700); err != nil {
		return fmt.Errorf("report: outbox: %w", err)
	}
	if err := os.Rename(filepath.Join(o.dir, name), filepath.Join(o.dir, deadDir, name)); err != nil {
		return fmt.Errorf("report: outbox: dead-letter: %w", err)
	}
	o.forget(name)
	o.dead.Add(1)
	return nil
}

// announceKind is what delivering a message of kind k announces about its keys.
func announceKind(k Kind) string {
	if k == KindResolved {
		return string(KindResolved)
	}
	return string(KindDrift)
}

// Announced reports whether every dedupe key of m was already announced the way m would
// announce it (a drift already reported, a resolution already reported). Messages without
// keys are never considered announced.
func (o *Outbox) Announced(m Message) bool {
	if len(m.Keys) == 0 {
		return false
	}
	kind := announceKind(m.Kind)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range m.Keys {
		if o.delivered[announceKey(k)].Kind != kind {
			return false
		}
	}
	return true
}

// MarkDelivered records m's keys as announced and persists the record: in the outbox directory,
// and in the shared RecordStore when there is one (see ShareRecord).
func (o *Outbox) MarkDelivered(m Message) error {
	kind := announceKind(m.Kind)
	now := time.Now().UTC()
	o.mu.Lock()
	for _, k := range m.Keys {
		o.delivered[announceKey(k)] = deliveredEntry{Kind: kind, At: now}
	}
	trim(o.delivered, maxDelivered)
	data, err := json.Marshal(o.delivered)
	var shared []byte
	if err == nil && o.store != nil {
		shared, err = sharedRecord(o.delivered)
	}
	store := o.store
	o.mu.Unlock()
	if err != nil {
		return fmt.Errorf("report: outbox: encode delivered: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(o.dir, deliveredFile), data); err != nil {
		return fmt.Errorf("report: outbox: %w", err)
	}
	if store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := store.Save(ctx, shared); err != nil {
			return fmt.Errorf("report: outbox: share delivery record: %w", err)
		}
	}
	return nil
}

// trim forgets the oldest entries of rec beyond limit.
func trim(rec map[string]deliveredEntry, limit int) {
	if len(rec) <= limit {
		return
	}
	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return rec[keys[i]].At.Before(rec[keys[j]].At) })
	for _, k := range keys[:len(keys)-limit] {
		delete(rec, k)
	}
}

// MaxSharedRecord bounds the encoded delivery record kept in a RecordStore: a Lease's
// annotations hold 256 KiB in all. The record keeps open drift only (what was announced and not
// yet resolved), newest first; past the bound the oldest open drift is left out, and would be
// announced again by a replica taking over.
const MaxSharedRecord = 64 << 10

// sharedRecord encodes the open drift of rec, the newest that fit in MaxSharedRecord once
// gzipped (entries compress about tenfold; the bound is checked on the JSON at 8×).
func sharedRecord(rec map[string]deliveredEntry) ([]byte, error) {
	open := map[string]deliveredEntry{}
	for k, e := range rec {
		if e.Kind == string(KindDrift) {
			open[k] = e
		}
	}
	for {
		data, err := json.Marshal(open)
		if err != nil || len(data) <= 8*MaxSharedRecord || len(open) == 0 {
			return data, err
		}
		trim(open, len(open)*3/4)
	}
}

// RecordStore keeps an outbox's delivery record where every replica reads it (the daemon: an
// annotation of its leader Lease), so whoever posts next knows what was announced, and how.
type RecordStore interface {
	// Load returns the record last saved, nil when there is none.
	Load(ctx context.Context) ([]byte, error)
	// Save replaces the record.
	Save(ctx context.Context, data []byte) error
}

// ShareRecord makes s the outbox's shared delivery record: every delivery is saved there too,
// and LoadShared reads it back.
func (o *Outbox) ShareRecord(s RecordStore) {
	o.mu.Lock()
	o.store = s
	o.mu.Unlock()
}

// LoadShared replaces the outbox's delivery record by the shared one: the drift the last poster
// announced and had not announced resolved.
func (o *Outbox) LoadShared(ctx context.Context) error {
	o.mu.Lock()
	s := o.store
	o.mu.Unlock()
	if s == nil {
		return nil
	}
	data, err := s.Load(ctx)
	if err != nil {
		return fmt.Errorf("report: outbox: load shared delivery record: %w", err)
	}
	rec := map[string]deliveredEntry{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &rec); err != nil {
			return fmt.Errorf("report: outbox: decode shared delivery record: %w", err)
		}
	}
	// The shared record is the truth: what this replica remembers from an earlier leadership
	// (an old volume) may have been resolved and announced since by another.
	o.mu.Lock()
	defer o.mu.Unlock()
	o.delivered = rec
	return nil
}

// AnnouncedDrift returns the drift identities (keys without the revision) the record says were
// last announced as drift, not yet as resolved.
func (o *Outbox) AnnouncedDrift() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for k, e := range o.delivered {
		if e.Kind == string(KindDrift) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// announceKey is the record's key of a dedupe key: its identity (the revision left out, so a
// drift standing across a new sync is the same announcement), ending in "|" so that it is its
// own announceKey.
func announceKey(k string) string {
	return Item{Key: k}.identity() + "|"
}

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
