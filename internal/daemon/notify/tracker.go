package notify

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// Item is one unit of drift: a drifted field of a Modified object, or a whole Missing or
// Extra object (Field nil). Values are already masked (see MaskSecrets).
type Item struct {
	// Key is the dedupe key: env, object, field path, manager and desired revision.
	Key      string `json:"key"`
	Env      string `json:"env"`
	Revision string `json:"revision"`
	// Object is the drifted object with only this item's field (none for Missing/Extra).
	Object drift.Object `json:"object"`
	// Resolution says, once the drift is gone, who set the value Git wants back and how long
	// the drift stood; nil while it stands or when nobody can be named.
	Resolution *Resolution `json:"resolution,omitempty"`
}

// Resolution is how a drift ended.
type Resolution struct {
	// By is the writer that owns the field now (argocd-controller for a sync or selfHeal), or,
	// for a Missing object back again, the writer that made it.
	By drift.Writer `json:"by"`
	// After is how long the drift stood, from the hand edit's time to By's (both to the second,
	// as managedFields keep them); Measured says whether both were known.
	After    time.Duration `json:"after,omitempty"`
	Measured bool          `json:"measured,omitempty"`
	// Verb says how it ended, for people: "reverted by" (another writer set Git's value back),
	// "set back by" (the writer of the drift did).
	Verb string `json:"verb,omitempty"`
	// How is the episode's end (episode.Reverted, Adopted, Overwritten, Deleted, Dropped); empty
	// when no episode was kept (Verb and By then say it).
	How string `json:"how,omitempty"`
	// Actor is the person behind By, when the audit events name one.
	Actor *drift.Actor `json:"actor,omitempty"`
	// Commit is the commit that adopted the live value into Git.
	Commit *episode.Commit `json:"commit,omitempty"`
}

// ResolutionOf says how an ended episode ended, for a resolution notice.
func ResolutionOf(e episode.Episode) *Resolution {
	if e.End == nil {
		return nil
	}
	r := &Resolution{How: e.End.How, Actor: e.End.Actor, Commit: e.End.Commit, After: e.Duration(e.End.At), Measured: true, Verb: "reverted by"}
	if e.End.By != nil {
		r.By = *e.End.By
		if r.By.Manager == e.Writer.Manager && e.End.How == episode.Reverted {
			r.Verb = "set back by"
		}
	}
	return r
}

// Summary says how the drift ended and how long it stood, for people ("" when nothing is known):
// "reverted by argocd-controller after 4m0s", "adopted into Git by commit 1a2b3c4 (prod: 3
// replicas) after 1h0m0s", "overwritten by kubectl-scale (bob) after 30s", "object deleted after 2m0s".
func (r *Resolution) Summary() string {
	who := r.By.Manager
	if r.Actor != nil && r.Actor.User != "" {
		if who != "" {
			who += " (" + r.Actor.User + ")"
		} else {
			who = r.Actor.User
		}
	}
	var s string
	switch r.How {
	case episode.Adopted:
		s = "adopted into Git"
		if c := r.Commit; c != nil {
			s += " by commit " + gitrepo.Short(c.SHA)
			if c.Subject != "" {
				s += " (" + message.Truncate(c.Subject, 80) + ")"
			}
		}
	case episode.Overwritten:
		s = "overwritten by " + who + ", a new drift"
	case episode.Deleted:
		s = "object deleted"
	case episode.Dropped:
		s = "no longer reported"
	default:
		if who == "" {
			return ""
		}
		s = r.Verb + " " + who
	}
	if took := r.Took(); took != "" {
		s += " " + took
	}
	return s
}

// Took says how long the drift stood, for people: "after 12s", "within 1s", or "".
func (r *Resolution) Took() string {
	switch {
	case !r.Measured:
		return ""
	case r.After < time.Second:
		return "within 1s"
	default:
		return "after " + r.After.Round(time.Second).String()
	}
}

// Field returns the item's field, nil for a Missing or Extra object.
func (it Item) Field() *drift.Field {
	if len(it.Object.Fields) == 0 {
		return nil
	}
	return &it.Object.Fields[0]
}

// identity is the key without the revision: the same drift seen against another revision.
func (it Item) identity() string {
	return message.Identity(it.Key)
}

// ObjectRef renders apiVersion/kind/namespace/name of an object ("-" for no namespace), after
// @cluster/ for an object of a cluster other than Argo CD's own.
func ObjectRef(o drift.Object) string {
	ns := o.Namespace
	if ns == "" {
		ns = "-"
	}
	ref := o.APIVersion + "/" + o.Kind + "/" + ns + "/" + o.Name
	if o.Cluster != "" {
		ref = "@" + o.Cluster + "/" + ref
	}
	return ref
}

// ItemKey is the dedupe key of a drift: env, object, field path, manager, desired revision.
func ItemKey(env string, o drift.Object, path, manager, revision string) string {
	return strings.Join([]string{env, ObjectRef(o), path, manager, revision}, "|")
}

// Items splits a report into drift items, masked, sorted by key.
func Items(r *drift.Report) []Item {
	var out []Item
	for _, o := range r.Objects {
		o = MaskSecrets(o)
		if o.Status != drift.Modified || len(o.Fields) == 0 {
			obj := o
			obj.Fields = nil
			manager := ""
			if o.Creator != nil {
				manager = o.Creator.Manager
			}
			out = append(out, Item{Key: ItemKey(r.Env, o, "", manager, r.Revision), Env: r.Env, Revision: r.Revision, Object: obj})
			continue
		}
		for _, f := range o.Fields {
			obj := o
			obj.Fields = []drift.Field{f}
			out = append(out, Item{Key: ItemKey(r.Env, o, f.Path, f.Manager, r.Revision), Env: r.Env, Revision: r.Revision, Object: obj})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

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

// ClusterOfKey is the cluster a dedupe key (see ItemKey) names: "" for Argo CD's own.
func ClusterOfKey(key string) string {
	_, rest, ok := strings.Cut(key, "|")
	ref, _, _ := strings.Cut(rest, "|")
	if !ok || !strings.HasPrefix(ref, "@") {
		return ""
	}
	c, _, _ := strings.Cut(ref[1:], "/")
	return c
}

// ItemFromKey rebuilds the item a dedupe key (see ItemKey) names, without values: env, object,
// field path, writer and revision (empty when the key has none).
func ItemFromKey(key string) (Item, bool) {
	parts := strings.Split(key, "|")
	if len(parts) < 5 {
		return Item{}, false
	}
	env, ref, manager, revision := parts[0], parts[1], parts[len(parts)-2], parts[len(parts)-1]
	path := strings.Join(parts[2:len(parts)-2], "|")
	r := strings.Split(ref, "/")
	var cluster string
	if len(r) > 0 && strings.HasPrefix(r[0], "@") {
		cluster, r = r[0][1:], r[1:]
	}
	if len(r) < 4 {
		return Item{}, false
	}
	o := drift.Object{APIVersion: strings.Join(r[:len(r)-3], "/"), Kind: r[len(r)-3], Namespace: r[len(r)-2], Name: r[len(r)-1], Cluster: cluster}
	if o.Namespace == "-" {
		o.Namespace = ""
	}
	if path != "" {
		o.Status = drift.Modified
		o.Fields = []drift.Field{{Path: path, Writer: drift.Writer{Manager: manager}}}
	} else if manager != "" {
		o.Creator = &drift.Writer{Manager: manager}
	}
	return Item{Key: key, Env: env, Revision: revision, Object: o}, true
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

// Resolve says how it ended, given the live object as it is now (nil: deleted) and the revision
// the cluster is now compared with: who owns the item's field now, or who made a Missing object
// again; After is measured from the hand edit's time when the item knows it. Nil when nobody can
// be named, or when the revision moved (Git changed, so the drift may have been adopted: the
// value's owner says nothing about that).
func Resolve(it Item, live *unstructured.Unstructured, revision string) *Resolution {
	if live == nil || revision != it.Revision {
		return nil
	}
	var by *drift.Writer
	f := it.Field()
	if f != nil {
		by = drift.OwnerOf(live, f.FieldPath)
	} else if it.Object.Status == drift.Missing {
		by = drift.CreatorOf(live)
	}
	if by == nil || by.Manager == "" {
		return nil
	}
	r := &Resolution{By: *by, Verb: "reverted by"}
	if f != nil && f.Manager == by.Manager {
		r.Verb = "set back by"
	}
	if f != nil && f.Time != "" && by.Time != "" {
		from, err1 := time.Parse(time.RFC3339, f.Time)
		to, err2 := time.Parse(time.RFC3339, by.Time)
		if err1 == nil && err2 == nil && !to.Before(from) {
			r.After, r.Measured = to.Sub(from), true
		}
	}
	return r
}
