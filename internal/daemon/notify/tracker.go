package notify

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Tracker remembers the drift of the previous report per environment and turns each new report
// into the drift that appeared and the drift that went away. It is safe for concurrent use and
// its state round-trips through JSON (MarshalJSON/UnmarshalJSON) so a daemon can persist it.
type Tracker struct {
	mu   sync.Mutex
	envs map[string]map[string]Item
}

// NewTracker returns a Tracker that has seen no report.
func NewTracker() *Tracker {
	return &Tracker{envs: map[string]map[string]Item{}}
}

// Observe records r as the current state of r.Env and returns the items not present in the
// previous report of that env (added) and the previous items no longer present (resolved).
// A drift whose only change is the desired revision (a new sync while it stands) is neither:
// it was announced and has not gone away. Both slices are sorted by key.
func (t *Tracker) Observe(r *drift.Report) (added, resolved []Item, err error) {
	return t.ObserveIn(r, nil)
}

// ObserveIn is Observe for the items in picks (nil: all): r speaks only for those. The env's
// other items stand as they were, neither resolved nor replaced (a replica that shares the work
// posts for its own shards). Every item of r must be one in picks.
func (t *Tracker) ObserveIn(r *drift.Report, in func(Item) bool) (added, resolved []Item, err error) {
	if r == nil {
		return nil, nil, fmt.Errorf("notify: observe: nil report")
	}
	cur := map[string]Item{}
	ids := map[string]bool{}
	for _, it := range Items(r) {
		cur[it.Key] = it
		ids[it.identity()] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.envs == nil {
		t.envs = map[string]map[string]Item{}
	}
	prev := t.envs[r.Env]
	kept := map[string]Item{} // the items r does not speak for: they stand as they were
	if in != nil {
		prev = maps.Clone(prev)
		for k, it := range prev {
			if !in(it) {
				kept[k] = it
				delete(prev, k)
			}
		}
	}
	prevIDs := map[string]bool{}
	for _, it := range prev {
		prevIDs[it.identity()] = true
	}
	for k, it := range cur {
		if _, ok := prev[k]; !ok && !prevIDs[it.identity()] {
			added = append(added, it)
		}
	}
	for k, it := range prev {
		if _, ok := cur[k]; !ok && !ids[it.identity()] {
			resolved = append(resolved, it)
		}
	}
	maps.Copy(cur, kept)
	t.envs[r.Env] = cur
	sortItems(added)
	sortItems(resolved)
	return added, resolved, nil
}

// Seed replaces the tracker's state by the drift others announced (identities as the outboxes
// record them, see outbox.Outbox.AnnouncedDrift), for a replica that starts to post: drift among them
// is not announced again, and their resolutions are announced. Items are rebuilt from the keys:
// object, field path and writer, without values.
func (t *Tracker) Seed(identities []string) {
	envs := map[string]map[string]Item{}
	for _, id := range identities {
		it, ok := ItemFromKey(id)
		if !ok {
			continue
		}
		if envs[it.Env] == nil {
			envs[it.Env] = map[string]Item{}
		}
		envs[it.Env][it.Key] = it
	}
	t.mu.Lock()
	t.envs = envs
	t.mu.Unlock()
}

// Replace replaces the items that in picks by the drift others announced (identities, as for
// Seed), for a replica that starts to post for part of the work (a shard): the other items stay.
func (t *Tracker) Replace(in func(Item) bool, identities []string) {
	seeded := map[string]map[string]Item{}
	for _, id := range identities {
		if it, ok := ItemFromKey(id); ok && in(it) {
			if seeded[it.Env] == nil {
				seeded[it.Env] = map[string]Item{}
			}
			seeded[it.Env][it.Key] = it
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(in)
	if t.envs == nil {
		t.envs = map[string]map[string]Item{}
	}
	for env, items := range seeded {
		if t.envs[env] == nil {
			t.envs[env] = map[string]Item{}
		}
		maps.Copy(t.envs[env], items)
	}
}

// Forget drops the items that in picks, announcing nothing: another replica posts for them now.
func (t *Tracker) Forget(in func(Item) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(in)
}

func (t *Tracker) forget(in func(Item) bool) {
	for _, items := range t.envs {
		maps.DeleteFunc(items, func(_ string, it Item) bool { return in(it) })
	}
}

// Current returns the items of the last report seen for env, sorted by key.
func (t *Tracker) Current(env string) []Item {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Item, 0, len(t.envs[env]))
	for _, it := range t.envs[env] {
		out = append(out, it)
	}
	sortItems(out)
	return out
}

func sortItems(items []Item) {
	sort.Slice(items, func(i, j int) bool { return items[i].Key < items[j].Key })
}

// trackerState is the JSON form of a Tracker.
type trackerState struct {
	Version int               `json:"version"`
	Envs    map[string][]Item `json:"envs"`
}

// MarshalJSON encodes the tracker's state (items per env, sorted).
func (t *Tracker) MarshalJSON() ([]byte, error) {
	t.mu.Lock()
	st := trackerState{Version: 1, Envs: map[string][]Item{}}
	for env, m := range t.envs {
		items := make([]Item, 0, len(m))
		for _, it := range m {
			items = append(items, it)
		}
		sortItems(items)
		st.Envs[env] = items
	}
	t.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("notify: encode tracker: %w", err)
	}
	return b, nil
}

// UnmarshalJSON replaces the tracker's state by one encoded by MarshalJSON.
func (t *Tracker) UnmarshalJSON(b []byte) error {
	var st trackerState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("notify: decode tracker: %w", err)
	}
	envs := map[string]map[string]Item{}
	for env, items := range st.Envs {
		m := map[string]Item{}
		for _, it := range items {
			it.Object = MaskSecrets(it.Object)
			m[it.Key] = it
		}
		envs[env] = m
	}
	t.mu.Lock()
	t.envs = envs
	t.mu.Unlock()
	return nil
}
