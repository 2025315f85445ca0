// Package episode keeps the history of drift: every drifted field (and every Missing or Extra
// object) is an episode with a start, the hand edit that made it, and an end that says how it
// ended — reverted by a sync or another writer, adopted into Git by a commit, overwritten by
// another hand edit (a new episode), or the object deleted. A Book turns each audit's report into
// episodes opened and ended, and round-trips through JSON so episodes survive a restart.
package episode

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/drift"
)

// How an episode ended.
const (
	// Reverted: the value Git wants is back, set by a sync (Argo CD) or any other writer.
	Reverted = "reverted"
	// Adopted: Git changed to say what the cluster says (a commit put the live value into Git).
	Adopted = "adopted"
	// Overwritten: another hand edit changed the drifted value again; a new episode starts.
	Overwritten = "overwritten"
	// Deleted: the object is gone from the cluster.
	Deleted = "deleted"
	// Dropped: Git no longer declares the object, or the drift left the report for a reason the
	// live object does not show (an ignore rule): nothing says who ended it.
	Dropped = "dropped"
)

// Commit names a Git commit, for people.
type Commit struct {
	SHA     string    `json:"sha"`
	Author  string    `json:"author,omitempty"`
	Date    time.Time `json:"date,omitzero"`
	Subject string    `json:"subject,omitempty"`
}

// Episode is one drift from its start to its end.
type Episode struct {
	// ID is unique in a Book: the drift's identity and its start.
	ID         string `json:"id"`
	Env        string `json:"env"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// UID is the live object's when the episode began (empty for a Missing object): another UID
	// at the end means the object was deleted and made again.
	UID string `json:"uid,omitempty"`
	// Status is Modified (a field drifted), Missing or Extra (the whole object).
	Status string `json:"status"`
	// Path is the drifted field ("" for a whole object); FieldPath its structured form.
	Path      string          `json:"path,omitempty"`
	FieldPath drift.FieldPath `json:"fieldPath,omitempty"`
	Change    string          `json:"change,omitempty"`
	// Git is the value Git declares, Live the value the hand edit left (Secret values masked).
	Git  any `json:"git,omitempty"`
	Live any `json:"live,omitempty"`
	// Start is when the drift began: the audit event's time when one names the person, else the
	// field manager's time in managedFields, else when the auditor first saw it.
	Start time.Time `json:"start"`
	// Writer and Actor made the drift: the field manager, and the person when the API server's
	// audit events name one.
	Writer drift.Writer `json:"writer"`
	Actor  *drift.Actor `json:"actor,omitempty"`
	// Revision is the Git revision the cluster was compared with when it began.
	Revision string `json:"revision"`
	// End is how it ended; nil while it is open.
	End *End `json:"end,omitempty"`
}

// End is how an episode ended.
type End struct {
	At  time.Time `json:"at"`
	How string    `json:"how"`
	// By is the writer that set the value back (Reverted) or overwrote it (Overwritten); Actor
	// the person when known.
	By    *drift.Writer `json:"by,omitempty"`
	Actor *drift.Actor  `json:"actor,omitempty"`
	// Revision is the Git revision the cluster was compared with when it ended; Commit names it
	// when Git adopted the live value.
	Revision string  `json:"revision,omitempty"`
	Commit   *Commit `json:"commit,omitempty"`
	// Next is the episode that overwrote this one.
	Next string `json:"next,omitempty"`
}

// Open reports whether the episode has not ended.
func (e *Episode) Open() bool { return e.End == nil }

// Duration is how long the drift stood: to its end, or to now while open.
func (e *Episode) Duration(now time.Time) time.Duration {
	end := now
	if e.End != nil {
		end = e.End.At
	}
	if end.Before(e.Start) {
		return 0
	}
	return end.Sub(e.Start)
}

// Identity is what stays the same across the episodes of one drifted field: env, object, path.
func Identity(env, apiVersion, kind, namespace, name, path string) string {
	return env + "|" + apiVersion + "/" + kind + "/" + namespace + "/" + name + "|" + path
}

func (e *Episode) identity() string {
	return Identity(e.Env, e.APIVersion, e.Kind, e.Namespace, e.Name, e.Path)
}

// LiveGetter returns the live object the watches hold (false: not in the cluster).
type LiveGetter func(apiVersion, kind, namespace, name string) (*unstructured.Unstructured, bool)

// Observation is one audit's report with what is needed to say how episodes ended.
type Observation struct {
	Report *drift.Report
	// Live reads the live objects; nil: every ended episode is Dropped.
	Live LiveGetter
	// Adopter names the commit, at or before the report's revision and after the episode's,
	// that put the live value into Git; ok false when Git no longer declares the field (the
	// episode is then Dropped). Nil, or a nil commit: the report's revision, by SHA alone.
	Adopter func(e Episode, revision string) (c *Commit, ok bool)
	// Mask hides Secret values in what the episodes keep; nil keeps values as they are.
	Mask func(drift.Object) drift.Object
	// Now is the observation time (default time.Now()).
	Now time.Time
}

// Defaults for a Book's retention of ended episodes.
const (
	DefaultKeep   = 1000
	DefaultMaxAge = 30 * 24 * time.Hour
)

// Book holds the open episodes and the most recent ended ones. It is safe for concurrent use.
type Book struct {
	mu     sync.Mutex
	open   map[string]*Episode // by identity
	ended  []Episode           // oldest first
	keep   int
	maxAge time.Duration
	seq    uint64
	dirty  bool // changed since the last TakeDirty
}

// TakeDirty reports whether the episodes changed (opened, ended, or learnt their person) since
// the last call: whether they need saving.
func (b *Book) TakeDirty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.dirty
	b.dirty = false
	return d
}

// NewBook returns an empty Book keeping at most keep ended episodes no older than maxAge
// (DefaultKeep and DefaultMaxAge when zero).
func NewBook(keep int, maxAge time.Duration) *Book {
	if keep <= 0 {
		keep = DefaultKeep
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	return &Book{open: map[string]*Episode{}, keep: keep, maxAge: maxAge}
}

// Observe records one env's report: drift not open yet opens an episode, open episodes the
// report no longer has end (how is read from the live object and the revision), and an open
// episode whose live value or writer changed ends as overwritten by a new one. It returns the
// episodes opened and ended, oldest identity first.
func (b *Book) Observe(obs Observation) (opened, ended []Episode) {
	rep := obs.Report
	if rep == nil {
		return nil, nil
	}
	now := obs.Now
	if now.IsZero() {
		now = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	unknown := map[string]bool{} // objects the report could not compare: their episodes wait
	for _, o := range rep.Objects {
		if obs.Mask != nil {
			o = obs.Mask(o)
		}
		if o.Status == drift.Unknown {
			unknown[Identity(rep.Env, o.APIVersion, o.Kind, o.Namespace, o.Name, "")] = true
			continue
		}
		for _, e := range candidates(rep, o, now) {
			id := e.identity()
			seen[id] = true
			cur, ok := b.open[id]
			switch {
			case ok && sameDrift(cur, &e):
				if cur.Actor == nil && e.Actor != nil { // the person's audit event came later
					cur.Actor = e.Actor
					cur.Start = e.Start
					b.dirty = true
				}
				if cur.Writer.Manager == "" && e.Writer.Manager != "" { // a watch named the writer later
					cur.Writer = e.Writer
					b.dirty = true
				}
				continue
			case ok:
				e.ID = b.newID(id, e.Start)
				cur.End = &End{At: e.Start, How: Overwritten, By: &e.Writer, Actor: e.Actor, Revision: rep.Revision, Next: e.ID}
				if cur.End.At.Before(cur.Start) {
					cur.End.At = now
				}
				ended = append(ended, b.close(id))
			default:
				e.ID = b.newID(id, e.Start)
			}
			ep := e
			if obs.Live != nil && ep.Status != drift.Missing {
				if live, ok := obs.Live(ep.APIVersion, ep.Kind, ep.Namespace, ep.Name); ok {
					ep.UID = string(live.GetUID())
				}
			}
			b.open[id] = &ep
			opened = append(opened, ep)
		}
	}
	for id, cur := range b.open {
		if cur.Env != rep.Env || seen[id] || unknown[Identity(cur.Env, cur.APIVersion, cur.Kind, cur.Namespace, cur.Name, "")] {
			continue
		}
		cur.End = howEnded(cur, obs, now)
		ended = append(ended, b.close(id))
	}
	if len(opened)+len(ended) > 0 {
		b.dirty = true
	}
	b.trim(now)
	sort.Slice(opened, func(i, j int) bool { return opened[i].ID < opened[j].ID })
	sort.Slice(ended, func(i, j int) bool { return ended[i].ID < ended[j].ID })
	return opened, ended
}

// candidates are the episodes a report's object would open: one per drifted field, or one for
// the whole object.
func candidates(rep *drift.Report, o drift.Object, now time.Time) []Episode {
	base := Episode{Env: rep.Env, APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
		Status: o.Status, Revision: rep.Revision}
	if o.Status != drift.Modified || len(o.Fields) == 0 {
		e := base
		if o.Creator != nil {
			e.Writer = *o.Creator
		}
		e.Actor = o.Actor // who created an Extra object, or deleted a Missing one
		e.Start = startOf(e.Writer, e.Actor, now)
		return []Episode{e}
	}
	out := make([]Episode, 0, len(o.Fields))
	for _, f := range o.Fields {
		e := base
		e.Path, e.FieldPath, e.Change = f.Path, f.FieldPath, f.Change
		e.Git, e.Live = f.Desired, f.Live
		e.Writer, e.Actor = f.Writer, f.Actor
		e.Start = startOf(f.Writer, f.Actor, now)
		out = append(out, e)
	}
	return out
}

// startOf is when a drift began: the audit event's time, else managedFields', else now.
func startOf(w drift.Writer, a *drift.Actor, now time.Time) time.Time {
	if a != nil {
		if t, err := time.Parse(time.RFC3339Nano, a.Time); err == nil {
			return t.UTC()
		}
	}
	if t, err := time.Parse(time.RFC3339, w.Time); err == nil && !t.After(now) {
		return t.UTC()
	}
	return now.UTC()
}

// sameDrift reports whether a report's drift is the open episode still: same live value, same
// writer. The desired value may move with Git (a new revision) without a new episode.
func sameDrift(open, now *Episode) bool {
	sameWriter := open.Writer.Manager == "" || open.Writer.Manager == now.Writer.Manager &&
		open.Writer.Subresource == now.Writer.Subresource
	return open.Status == now.Status && sameWriter && equalJSON(open.Live, now.Live)
}

// equalJSON compares two values as JSON would encode them (a value read back from the state
// file has float64 where the audit had int64).
func equalJSON(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// howEnded reads how an episode the report no longer has ended.
//
// A field is reverted when its live value is no longer the one the hand edit left (who set it
// is the field's owner now); adopted when Git moved and the live value is still the hand edit's
// (the commit that put it into Git is named); dropped when neither Git nor the value moved (an
// ignore rule, a controller rule, a new engine took it out of the report). An object whose UID
// changed was deleted (and made again).
func howEnded(e *Episode, obs Observation, now time.Time) *End {
	end := &End{At: now, How: Dropped, Revision: obs.Report.Revision}
	moved := obs.Report.Revision != e.Revision
	var live *unstructured.Unstructured
	found := false
	if obs.Live != nil {
		live, found = obs.Live(e.APIVersion, e.Kind, e.Namespace, e.Name)
	}
	if found && e.UID != "" && string(live.GetUID()) != e.UID {
		end.How = Deleted // and made again since
		return end
	}
	switch {
	case obs.Live == nil:
	case e.Status == drift.Extra:
		if !found {
			end.How = Deleted
		} else if moved {
			adopted(e, obs, end, now) // Git declares it now
		}
	case e.Status == drift.Missing:
		if found {
			end.How = Reverted
			end.By = drift.CreatorOf(live)
		} else if moved {
			adopted(e, obs, end, now) // Git no longer declares it
		}
	case !found:
		end.How = Deleted
	default:
		v, has := drift.ValueAt(live.Object, e.FieldPath)
		kept := has && equalJSON(v, e.Live)
		if e.Change == drift.Removed {
			kept = !has
		}
		switch {
		case kept && moved:
			adopted(e, obs, end, now)
		case kept: // nothing moved: the drift left the report for another reason
		default:
			end.How = Reverted
			end.By = drift.OwnerOf(live, e.FieldPath)
			// the writer's own time when managedFields has it: the sync, not the audit, ended it
			if end.By != nil {
				if t, err := time.Parse(time.RFC3339, end.By.Time); err == nil && !t.Before(e.Start) && !t.After(now) {
					end.At = t.UTC()
				}
			}
		}
	}
	return end
}

// adopted ends e as adopted into Git, naming the commit, at the commit's time when it is known
// and falls inside the episode; as dropped when Git no longer declares the field.
func adopted(e *Episode, obs Observation, end *End, now time.Time) {
	end.How = Adopted
	end.Commit = &Commit{SHA: end.Revision}
	if obs.Adopter == nil {
		return
	}
	c, ok := obs.Adopter(*e, end.Revision)
	switch {
	case !ok:
		end.How, end.Commit = Dropped, nil
	case c != nil:
		end.Commit = c
		if !c.Date.IsZero() && c.Date.After(e.Start) && c.Date.Before(now) {
			end.At = c.Date.UTC()
		}
	}
}

// close moves the open episode id to the ended ones and returns it.
func (b *Book) close(id string) Episode {
	e := *b.open[id]
	delete(b.open, id)
	b.ended = append(b.ended, e)
	return e
}

// newID returns a unique episode ID for a drift identity starting at start.
func (b *Book) newID(identity string, start time.Time) string {
	b.seq++
	return fmt.Sprintf("%s@%s#%d", identity, start.UTC().Format(time.RFC3339), b.seq)
}

// trim drops ended episodes past the retention.
func (b *Book) trim(now time.Time) {
	cut := 0
	for cut < len(b.ended) && (len(b.ended)-cut > b.keep || now.Sub(b.ended[cut].End.At) > b.maxAge) {
		cut++
	}
	if cut > 0 {
		b.ended = slices.Clone(b.ended[cut:])
	}
}

// Open returns the open episodes of env (every env when env is ""), oldest first.
func (b *Book) Open(env string) []Episode {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Episode
	for _, e := range b.open {
		if env == "" || e.Env == env {
			out = append(out, *e)
		}
	}
	sortByStart(out)
	return out
}

// Ended returns up to n ended episodes of env (every env when env is ""), the most recently
// ended first (n <= 0: all kept).
func (b *Book) Ended(env string, n int) []Episode {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Episode
	for i := len(b.ended) - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		if env == "" || b.ended[i].Env == env {
			out = append(out, b.ended[i])
		}
	}
	return out
}

// LastEnded returns the most recently ended episode of a drift identity (see Identity).
func (b *Book) LastEnded(identity string) (Episode, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.ended) - 1; i >= 0; i-- {
		if b.ended[i].identity() == identity {
			return b.ended[i], true
		}
	}
	return Episode{}, false
}

func sortByStart(es []Episode) {
	sort.Slice(es, func(i, j int) bool {
		if !es[i].Start.Equal(es[j].Start) {
			return es[i].Start.Before(es[j].Start)
		}
		return es[i].ID < es[j].ID
	})
}

// state is a Book's JSON form.
type state struct {
	Version int       `json:"version"`
	Seq     uint64    `json:"seq"`
	Open    []Episode `json:"open"`
	Ended   []Episode `json:"ended"`
}

// MarshalJSON encodes the open and kept ended episodes.
func (b *Book) MarshalJSON() ([]byte, error) {
	open := b.Open("")
	b.mu.Lock()
	st := state{Version: 1, Seq: b.seq, Open: open, Ended: slices.Clone(b.ended)}
	b.mu.Unlock()
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("episode: encode: %w", err)
	}
	return data, nil
}

// UnmarshalJSON replaces the Book's episodes by those MarshalJSON encoded; retention settings
// stay.
func (b *Book) UnmarshalJSON(data []byte) error {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("episode: decode: %w", err)
	}
	if st.Version != 1 {
		return fmt.Errorf("episode: state version %d not supported", st.Version)
	}
	open := map[string]*Episode{}
	for i := range st.Open {
		e := st.Open[i]
		open[e.identity()] = &e
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.ended, b.seq = open, st.Ended, st.Seq
	if b.keep <= 0 {
		b.keep, b.maxAge = DefaultKeep, DefaultMaxAge
	}
	return nil
}
