// Package auditlog reads the API server's audit events and names the person behind each drifted
// field: the write that made it, matched by object and by the resourceVersion the write produced
// or the field manager and time managedFields recorded. Events come from a JSON-lines audit log
// file (--audit-log-path) or kube-apiserver's webhook backend (--audit-webhook-config-file, batch
// mode), both set by kube-apiserver flags; or from admission (AdmissionHandler: a validating
// admission webhook that observes writes and never refuses one), which any cluster, managed ones
// included, can call. A reader for a managed cluster's exported log adds another Source.
package auditlog

import (
	"context"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Source feeds audit events into a Store.
type Source interface {
	// Load adds the events it has to s.
	Load(ctx context.Context, s *Store) error
}

// writesPerSlab is how many writes are allocated at once (a slab is freed once all of its writes
// are evicted; eviction goes in the order added).
const writesPerSlab = 64

// DefaultMax bounds the events a Store holds: the oldest go first.
const DefaultMax = 100_000

// Object names what an event wrote: API group, resource (plural), namespace, name.
type Object struct {
	// Cluster is the cluster whose API server logged the write, "" for Argo CD's own.
	Cluster                          string
	Group, Resource, Namespace, Name string
}

// write is the part of a write event the matching uses.
type write struct {
	at              time.Time
	uid             string // of the object the write returned (objectRef.uid is set only for some)
	manager         string // the fieldManager query parameter, else the user agent's program
	subresource     string // scale for kubectl scale and the HPA
	resourceVersion string // of the object the write returned
	system          bool   // a Kubernetes identity (system:…: controllers, nodes, service accounts)
	admitted        bool   // seen in admission (AddAdmission): it may have been refused after; only its changes name it
	changesFrom     source // where changes come from
	truncated       bool   // changes are not all it changed (Write.ChangesTruncated)
	changeBytes     int32  // what changes take (heldSize), counted in Store.changeBytes
	actor           drift.Actor
	changes         []heldChange // the fields it changed, when known (changesFrom)
}

// Store holds write events by object, bounded in number, and their changes bounded in bytes. It
// is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	max   int
	n     int
	byObj map[Object][]*write
	order []held // in the order added: the front is evicted first

	changeBytes, maxChangeBytes int // what the held writes' changes take, and its bound
	stripped                    int // order[:stripped] hold no changes (dropped for the bound)

	slab []write // where the next writes are allocated

	respMu sync.Mutex // orders the diffs of writes' responses; taken before mu, never inside it
	resp   responses  // the latest response per object

	argo argoRecords // what argocd-server recorded of its users' writes
}

type held struct {
	key Object
	w   *write
}

// NewStore returns a Store holding at most max events (DefaultMax when max <= 0).
func NewStore(max int) *Store {
	if max <= 0 {
		max = DefaultMax
	}
	return &Store{max: max, byObj: map[Object][]*write{}, maxChangeBytes: DefaultMaxChangeBytes, resp: responses{max: DefaultMaxResponseBytes}}
}

// LimitChanges bounds the memory the held writes' changes take (DefaultMaxChangeBytes when
// bytes <= 0); past it, the oldest writes' changes are dropped first.
func (s *Store) LimitChanges(bytes int) {
	if bytes <= 0 {
		bytes = DefaultMaxChangeBytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxChangeBytes = bytes
	s.stripOldest()
}

// Len is the number of events held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
