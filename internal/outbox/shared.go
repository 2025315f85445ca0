package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/llm-gitops/platform/internal/notify/message"
)

// announceKind is what delivering a message of kind k announces about its keys.
func announceKind(k message.Kind) string {
	if k == message.KindResolved {
		return string(message.KindResolved)
	}
	return string(message.KindDrift)
}

// Announced reports whether every dedupe key of m was already announced the way m would
// announce it (a drift already reported, a resolution already reported). Messages without
// keys are never considered announced.
func (o *Outbox) Announced(m message.Message) bool {
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
		if e.Kind == string(message.KindDrift) {
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
		return fmt.Errorf("outbox: load shared delivery record: %w", err)
	}
	rec := map[string]deliveredEntry{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &rec); err != nil {
			return fmt.Errorf("outbox: decode shared delivery record: %w", err)
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
		if e.Kind == string(message.KindDrift) {
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
	return message.Identity(k) + "|"
}
