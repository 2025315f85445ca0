// Package auditlog reads the API server's audit events and names the person behind each drifted
// field: the write that made it, matched by object and by the resourceVersion the write produced
// or the field manager and time managedFields recorded. Events come from a JSON-lines audit log
// file (--audit-log-path) or kube-apiserver's webhook backend (--audit-webhook-config-file, batch
// mode); a reader for a managed cluster's exported log adds another Source.
package auditlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/drift"
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

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true}

// Add keeps ev when it is a completed write to a named object (other events are ignored).
func (s *Store) Add(ev *auditv1.Event) {
	if ev.Stage != auditv1.StageResponseComplete || !writeVerbs[ev.Verb] || ev.ObjectRef == nil || ev.ObjectRef.Name == "" ||
		ev.ObjectRef.Subresource == "status" || ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 300 {
		return
	}
	resp := response(ev)
	rv, uid := responseMeta(resp)
	if uid == "" {
		uid = string(ev.ObjectRef.UID)
	}
	at := ev.StageTimestamp.UTC()
	nw := write{at: at, uid: uid, manager: manager(ev), subresource: ev.ObjectRef.Subresource, resourceVersion: rv,
		system: strings.HasPrefix(ev.User.Username, "system:") && ev.ImpersonatedUser == nil,
		actor: drift.Actor{User: ev.User.Username, Groups: ev.User.Groups, SourceIPs: ev.SourceIPs, UserAgent: ev.UserAgent,
			Verb: ev.Verb, Time: at.Format(time.RFC3339), AuditID: string(ev.AuditID)}}
	if ev.ImpersonatedUser != nil {
		nw.actor.ImpersonatedUser = ev.ImpersonatedUser.Username
	}
	key := Object{Group: ev.ObjectRef.APIGroup, Resource: ev.ObjectRef.Resource, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}
	changes, from, more := s.changesOf(key, ev, resp, uid, at)
	var size int
	nw.changes, size, nw.truncated = hold(changes, more)
	nw.changesFrom, nw.changeBytes = from, int32(size)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Writes are allocated in slabs, in the order added: an object's writes stay close in memory
	// (matching walks them all) instead of among the decoded responses' garbage.
	if len(s.slab) == cap(s.slab) {
		s.slab = make([]write, 0, writesPerSlab)
	}
	s.slab = append(s.slab, nw)
	w := &s.slab[len(s.slab)-1]
	ws := s.byObj[key]
	i := sort.Search(len(ws), func(i int) bool { return ws[i].at.After(w.at) })
	ws = append(ws, nil)
	copy(ws[i+1:], ws[i:])
	ws[i] = w
	s.byObj[key] = ws
	s.order = append(s.order, held{key, w})
	s.n++
	s.changeBytes += int(w.changeBytes)
	for s.n > s.max {
		s.evictOldest()
	}
	s.stripOldest()
}

// stripOldest drops the changes of the oldest writes that hold some until the changes held fit
// their bound (held under mu). The writes stay, marked truncated: their person and times still
// match.
func (s *Store) stripOldest() {
	for s.changeBytes > s.maxChangeBytes && s.stripped < len(s.order) {
		w := s.order[s.stripped].w
		s.stripped++
		if w.changes != nil || w.changeBytes != 0 {
			s.changeBytes -= int(w.changeBytes)
			w.changes, w.changeBytes, w.truncated = nil, 0, true
		}
	}
}

// evictOldest drops the event added first (held under mu).
func (s *Store) evictOldest() {
	h := s.order[0]
	s.order[0] = held{} // the write can go with its slab
	s.order = s.order[1:]
	if len(s.order) < cap(s.order)/4 { // let the array behind the queue shrink
		s.order = append([]held(nil), s.order...)
	}
	if s.stripped > 0 {
		s.stripped--
	}
	s.changeBytes -= int(h.w.changeBytes)
	h.w.changes = nil // its slab may stay for writes added after it
	ws := s.byObj[h.key]
	for i, w := range ws {
		if w == h.w {
			ws = append(ws[:i], ws[i+1:]...)
			ws[:len(ws)+1][len(ws)] = nil // the slab it lies in can go once its other writes do
			break
		}
	}
	if len(ws) == 0 {
		delete(s.byObj, h.key)
	} else {
		s.byObj[h.key] = ws
	}
	s.n--
}

// manager is the field manager a write was made under: the fieldManager parameter kubectl and
// other clients send, else the program of the user agent ("kubectl/v1.32 …" → "kubectl"), which
// is the API server's default.
func manager(ev *auditv1.Event) string {
	if u, err := url.Parse(ev.RequestURI); err == nil {
		if m := u.Query().Get("fieldManager"); m != "" {
			return m
		}
	}
	ua := ev.UserAgent // the API server's default manager: the user agent up to its first "/"
	if i := strings.IndexByte(ua, '/'); i >= 0 {
		ua = ua[:i]
	}
	return ua
}

// response is the object a write returned, decoded (nil when not logged).
func response(ev *auditv1.Event) map[string]any {
	if ev.ResponseObject == nil || len(ev.ResponseObject.Raw) == 0 {
		return nil
	}
	var obj map[string]any
	if utiljson.Unmarshal(ev.ResponseObject.Raw, &obj) != nil {
		return nil
	}
	return obj
}

// responseMeta is the resourceVersion and UID of the object a write returned ("" when not logged).
func responseMeta(obj map[string]any) (rv, uid string) {
	md, _ := obj["metadata"].(map[string]any)
	rv, _ = md["resourceVersion"].(string)
	uid, _ = md["uid"].(string)
	return rv, uid
}

// Live is what the matching knows of the object as it is now.
type Live struct {
	UID, ResourceVersion string
}

// Who returns the person behind field f of obj (nil when no event matches):
//   - the newest write whose held changes touch f's path (at it, above it — an atomic list or
//     map, a list item, a parent removed — or below it), when what it left there is f's live
//     value (nothing, for a removed field); when the newest such write left another value, a
//     write whose changes are not known set the live one, and the rules below decide;
//   - else the write that made the live object as it is (its response carries the live
//     resourceVersion; the oldest such write, a write that changed nothing returns the same one),
//     when its field manager and subresource are f's — or, for a removed field (no manager), when
//     it is a person's write to the object itself (not the applier's, not a subresource's, not a
//     Kubernetes identity's such as a controller's or a node's);
//   - else the write under f's manager and subresource closest in time to f's managedFields time;
//   - else, for a removed field, the newest such write by a person.
//
// Writes to an object of another UID (deleted and made again) are left out.
func (s *Store) Who(obj Object, live Live, f *drift.Field, applier string) *drift.Actor {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ws []*write
	for _, w := range s.byObj[obj] {
		if w.uid == "" || live.UID == "" || w.uid == live.UID {
			ws = append(ws, w)
		}
	}
	removed := f.Manager == ""
	mine := func(w *write) bool {
		if removed {
			return w.manager != applier && w.subresource == "" && !w.system
		}
		return w.manager == f.Manager && w.subresource == f.Subresource
	}
	if w := byChanges(ws, f); w != nil {
		return pick(w, MatchChanges)
	}
	if live.ResourceVersion != "" {
		for _, w := range ws {
			if w.resourceVersion == live.ResourceVersion && mine(w) {
				return pick(w, MatchResourceVersion)
			}
		}
	}
	if !removed {
		at, err := time.Parse(time.RFC3339, f.Time)
		var best *write
		for _, w := range ws {
			if !mine(w) {
				continue
			}
			if best == nil || err == nil && absDur(w.at.Sub(at)) < absDur(best.at.Sub(at)) || err != nil && w.at.After(best.at) {
				best = w
			}
		}
		if best != nil {
			return pick(best, MatchFieldManager)
		}
		return nil
	}
	for i := len(ws) - 1; i >= 0; i-- {
		if mine(ws[i]) {
			return pick(ws[i], MatchLatestWrite)
		}
	}
	return nil
}

// How a write was matched (drift.Actor.Match).
const (
	MatchChanges         = "changes"
	MatchResourceVersion = "resourceVersion"
	MatchFieldManager    = "fieldManager"
	MatchLatestWrite     = "latest write"
	MatchCreated         = "created"
	MatchDeleted         = "deleted"
)

func pick(w *write, how string) *drift.Actor {
	a := w.actor
	a.Match = how
	return &a
}

// Creator returns the person who made obj, an object the cluster has that Git does not declare
// (nil when no event says): the write that created it — a create, or an apply that made it —
// whose response names uid, else the newest such write of that name whose UID is not known (a
// create logged without its response, as the policy logs Secrets). Match is "created".
func (s *Store) Creator(obj Object, uid string) *drift.Actor {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.byObj[obj]
	var unknown *write
	for i := len(ws) - 1; i >= 0; i-- {
		w := ws[i]
		if w.subresource != "" || w.actor.Verb != "create" && w.changesFrom != created {
			continue
		}
		if uid != "" && w.uid == uid {
			return pick(w, MatchCreated)
		}
		if unknown == nil && (w.uid == "" || uid == "") {
			unknown = w
		}
	}
	if unknown != nil {
		return pick(unknown, MatchCreated)
	}
	return nil
}

// Deleter returns the person who deleted obj, an object Git declares that the cluster does not
// have (nil when no event says): the newest delete of it (not of a subresource). A delete the
// garbage collector or the namespace controller made names that controller; a deletecollection
// names no object and is not held. Match is "deleted".
func (s *Store) Deleter(obj Object) *drift.Actor {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.byObj[obj]
	for i := len(ws) - 1; i >= 0; i-- {
		if w := ws[i]; w.actor.Verb == "delete" && w.subresource == "" {
			return pick(w, MatchDeleted)
		}
	}
	return nil
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// File is a Source reading a JSON-lines audit log (kube-apiserver --audit-log-path with
// --audit-log-format=json), or a file of such lines a managed cluster's log export wrote.
type File struct{ Path string }

// Load reads every event of the file into s. A line that is not an event is an error naming
// the file and line.
func (f File) Load(ctx context.Context, s *Store) error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer fh.Close()
	return readLines(ctx, fh, f.Path, s)
}

func readLines(ctx context.Context, r io.Reader, name string, s *Store) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	sc.Split(completeLines)
	line := 0
	for sc.Scan() {
		line++
		if line%1000 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(b, &ev); err != nil {
			return fmt.Errorf("audit log %s:%d: %w", name, line, err)
		}
		s.Add(&ev)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit log %s:%d: %w", name, line, err)
	}
	return nil
}

// completeLines splits at newlines and drops a last line without one: the API server may be
// writing it.
func completeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// Handler receives kube-apiserver's webhook backend: POSTed EventLists (batch mode) are added to
// s. Put it behind the same authentication as the API.
func Handler(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST an audit.k8s.io/v1 EventList", http.StatusMethodNotAllowed)
			return
		}
		var list auditv1.EventList
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<20))
		if err := dec.Decode(&list); err != nil && !errors.Is(err, io.EOF) {
			http.Error(w, "decode EventList: "+err.Error(), http.StatusBadRequest)
			return
		}
		for i := range list.Items {
			s.Add(&list.Items[i])
		}
		w.WriteHeader(http.StatusOK)
	})
}

// Follow reads the file as kube-apiserver appends to it, every interval until ctx ends: new
// complete lines are added to s (a line still being written is read at the next poll). A file
// that shrank (rotated: --audit-log-maxsize) is read again from its start. A line that is not an
// event is skipped and reported to onErr (nil: ignored), as are errors opening the file, which is
// tried again at the next poll.
func (f File) Follow(ctx context.Context, s *Store, interval time.Duration, onErr func(error)) {
	var offset int64
	for {
		if err := f.readFrom(ctx, s, &offset, onErr); err != nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// readFrom adds the complete lines from *offset on, advancing it past each line read.
func (f File) readFrom(ctx context.Context, s *Store, offset *int64, onErr func(error)) error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if st.Size() < *offset { // rotated
		*offset = 0
	}
	if _, err := fh.Seek(*offset, io.SeekStart); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	r := bufio.NewReaderSize(fh, 1<<20)
	for ctx.Err() == nil {
		line, err := r.ReadBytes('\n')
		if err != nil { // EOF: a partial line waits for its newline
			return nil
		}
		*offset += int64(len(line))
		var ev auditv1.Event
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			if onErr != nil {
				onErr(fmt.Errorf("audit log %s at byte %d: %w", f.Path, *offset-int64(len(line)), err))
			}
			continue
		}
		s.Add(&ev)
	}
	return ctx.Err()
}
