package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"

	"github.com/llm-gitops/platform/internal/engine/atomicfile"
)

// Enqueue stores m durably. A message whose ID is already pending is not stored twice. When
// the bound is exceeded the oldest pending messages are dropped and counted.
func (o *Outbox) Enqueue(m message.Message) error {
	if m.ID == "" {
		return errors.New("outbox: message without id")
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("outbox: encode: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.ids[m.ID]; ok {
		return nil
	}
	o.seq = max(o.seq+1, uint64(time.Now().UnixNano()))
	name := fmt.Sprintf("%s%020d-%s.json", msgPrefix, o.seq, m.ID)
	if err := atomicfile.Write(filepath.Join(o.dir, name), data); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	o.files = append(o.files, name)
	o.ids[m.ID] = name
	for len(o.files) > o.max {
		old := o.files[0]
		if err := os.Remove(filepath.Join(o.dir, old)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("outbox: drop oldest: %w", err)
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
			return Pending{}, false, fmt.Errorf("outbox: %w", err)
		}
		var m message.Message
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
func (o *Outbox) DropPending(drop func(message.Message) bool) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, name := range slices.Clone(o.files) {
		data, err := os.ReadFile(filepath.Join(o.dir, name))
		if err != nil {
			continue
		}
		var m message.Message
		if json.Unmarshal(data, &m) != nil || !drop(m) {
			continue
		}
		if err := os.Remove(filepath.Join(o.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("outbox: drop: %w", err)
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
		return fmt.Errorf("outbox: remove: %w", err)
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
		return fmt.Errorf("outbox: %w", err)
	}
	if err := os.Rename(filepath.Join(o.dir, name), filepath.Join(o.dir, deadDir, name)); err != nil {
		return fmt.Errorf("outbox: dead-letter: %w", err)
	}
	o.forget(name)
	o.dead.Add(1)
	return nil
}

// MarkDelivered records m's keys as announced and persists the record: in the outbox directory,
// and in the shared RecordStore when there is one (see ShareRecord).
func (o *Outbox) MarkDelivered(m message.Message) error {
	kind := announceKind(m.Kind)
	now := time.Now().UTC()
	o.mu.Lock()
	for _, k := range m.Keys {
		o.delivered[announceKey(k)] = deliveredEntry{Kind: kind, At: now}
	}
	trim(o.delivered, maxDelivered)
	data, err := json.Marshal(o.delivered)
	var shared map[string][]byte
	var stores map[string]RecordStore
	if err == nil {
		shared, stores, err = o.sharedRecords(m.Keys)
	}
	o.mu.Unlock()
	if err != nil {
		return fmt.Errorf("outbox: encode delivered: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(o.dir, deliveredFile), data); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	for shard, store := range stores {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := store.Save(ctx, shared[shard])
		cancel()
		if err != nil {
			return fmt.Errorf("outbox: share delivery record: %w", err)
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
