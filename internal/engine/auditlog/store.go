package auditlog

import (
	"sort"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true}

// Add keeps ev, an event of Argo CD's own cluster, when it is a completed write to a named object
// (other events are ignored).
func (s *Store) Add(ev *auditv1.Event) { s.AddFrom("", ev) }

// AddFrom is Add for an event the API server of cluster logged: its writes match that cluster's
// objects only.
func (s *Store) AddFrom(cluster string, ev *auditv1.Event) { s.addEvent(cluster, ev, SourceAuditLog) }

// addEvent is AddFrom naming where the event came from (drift.Actor.From).
func (s *Store) addEvent(cluster string, ev *auditv1.Event, from string) {
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
			Verb: ev.Verb, Time: at.Format(time.RFC3339), AuditID: string(ev.AuditID), From: from}}
	if ev.ImpersonatedUser != nil {
		nw.actor.ImpersonatedUser = ev.ImpersonatedUser.Username
	}
	key := Object{Cluster: cluster, Group: ev.ObjectRef.APIGroup, Resource: ev.ObjectRef.Resource, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}
	changes, src, more := s.changesOf(key, ev, resp, uid, at)
	var size int
	nw.changes, size, nw.truncated = hold(changes, more)
	nw.changesFrom, nw.changeBytes = src, int32(size)
	s.insert(key, nw)
}

// insert holds nw as a write to key, evicting the oldest past the bounds.
func (s *Store) insert(key Object, nw write) {
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
