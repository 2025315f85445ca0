package auditlog

import (
	"net/url"
	"strings"
	"time"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

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
//   - else the write under f's manager and subresource closest in time to f's managedFields time,
//     unless every such write is older than that time (the write that set it is not held yet);
//   - else, for a removed field, the newest such write by a person.
//
// Writes to an object of another UID (deleted and made again) are left out. A write seen only in
// admission (AddAdmission) names its person by the first rule alone: the API server may have
// refused it after.
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
		if w.admitted {
			return false // maybe refused after admission: only its changes name it (byChanges)
		}
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
		if best != nil && err == nil && best.at.Before(at.Add(-time.Second)) && !writeSince(ws, f.Manager, f.Subresource, at) {
			// The manager's entry was written after every write of it the store holds: the
			// event of that write is not in yet (a log read behind the API server). Nobody is
			// named rather than an earlier writer under the same manager.
			return nil
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
		if w.admitted {
			continue // a create admitted but maybe refused: only its UID, the live one's, names it
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

// writeSince says whether ws holds a write under manager and subresource completed no earlier
// than a second before at (a managedFields time, which has whole seconds).
func writeSince(ws []*write, manager, subresource string, at time.Time) bool {
	for _, w := range ws {
		if !w.admitted && w.manager == manager && w.subresource == subresource && !w.at.Before(at.Add(-time.Second)) {
			return true
		}
	}
	return false
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
