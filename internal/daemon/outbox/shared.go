package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/llm-gitops/platform/internal/daemon/message"
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
	o.ShareRecords(nil, func(string) RecordStore { return s })
}

// ShareRecords keeps the shared delivery record per shard (replicas that share the work each
// post for their shards): shardOf names the shard of a dedupe key (nil: one shard, ""), store
// the RecordStore of a shard (nil when that shard's record is not shared). A delivery is saved
// in the record of each shard its keys belong to, and LoadShard reads one shard's back.
func (o *Outbox) ShareRecords(shardOf func(key string) string, store func(shard string) RecordStore) {
	if shardOf == nil {
		shardOf = func(string) string { return "" }
	}
	o.mu.Lock()
	o.store, o.shardOf = store, shardOf
	o.mu.Unlock()
}

// LoadShared replaces the outbox's delivery record by the shared one: the drift the last poster
// announced and had not announced resolved.
func (o *Outbox) LoadShared(ctx context.Context) error { return o.LoadShard(ctx, "") }

// LoadShard replaces the outbox's delivery record of shard's keys by the shard's shared one:
// the drift its last poster announced and had not announced resolved. The other shards'
// entries stay.
func (o *Outbox) LoadShard(ctx context.Context, shard string) error {
	o.mu.Lock()
	var s RecordStore
	if o.store != nil {
		s = o.store(shard)
	}
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
	for k := range o.delivered {
		if o.shardOf(k) == shard {
			delete(o.delivered, k)
		}
	}
	for k, e := range rec {
		if o.shardOf(k) == shard {
			o.delivered[k] = e
		}
	}
	return nil
}

// sharedRecords encodes, per shard that keys touch, the shard's open drift (see sharedRecord),
// with the shard's store. Called with o.mu held.
func (o *Outbox) sharedRecords(keys []string) (map[string][]byte, map[string]RecordStore, error) {
	if o.store == nil {
		return nil, nil, nil
	}
	data, stores := map[string][]byte{}, map[string]RecordStore{}
	for _, k := range keys {
		shard := o.shardOf(announceKey(k))
		if _, done := stores[shard]; done {
			continue
		}
		stores[shard] = o.store(shard)
	}
	for shard, s := range stores {
		if s == nil {
			delete(stores, shard)
			continue
		}
		part := map[string]deliveredEntry{}
		for k, e := range o.delivered {
			if o.shardOf(k) == shard {
				part[k] = e
			}
		}
		b, err := sharedRecord(part)
		if err != nil {
			return nil, nil, err
		}
		data[shard] = b
	}
	return data, stores, nil
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
