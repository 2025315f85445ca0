// Package episode keeps the history of drift: every drifted field (and every Missing or Extra
// object) is an episode with a start, the hand edit that made it, and an end that says how it
// ended — reverted by a sync or another writer, adopted into Git by a commit, overwritten by
// another hand edit (a new episode), or the object deleted. A Book turns each audit's report into
// episodes opened and ended, and round-trips through JSON so episodes survive a restart.
package episode

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/drift"
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
	// Cluster names the object's cluster when it is not Argo CD's own.
	Cluster string `json:"cluster,omitempty"`
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

// Identity is what stays the same across the episodes of one drifted field: env, object (with
// its cluster when not Argo CD's own), path.
func Identity(env, cluster, apiVersion, kind, namespace, name, path string) string {
	obj := apiVersion + "/" + kind + "/" + namespace + "/" + name
	if cluster != "" {
		obj = "@" + cluster + "/" + obj
	}
	return env + "|" + obj + "|" + path
}

func (e *Episode) identity() string {
	return Identity(e.Env, e.Cluster, e.APIVersion, e.Kind, e.Namespace, e.Name, e.Path)
}

// LiveGetter returns the live object the watches of cluster ("" for Argo CD's own) hold
// (false: not there).
type LiveGetter func(cluster, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, bool)

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
	// Speaks, when set, says which clusters the report speaks for: the open episodes of the
	// others stand as they are (a replica that shares the work audits only its clusters).
	Speaks func(cluster string) bool
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

// Drop forgets the open episodes pick picks, ending none: another replica follows them now. It
// returns how many it dropped.
func (b *Book) Drop(pick func(Episode) bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for id, e := range b.open {
		if pick(*e) {
			delete(b.open, id)
			n++
		}
	}
	if n > 0 {
		b.dirty = true
	}
	return n
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
