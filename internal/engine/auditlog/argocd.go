package auditlog

import (
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// SourceArgoCD is drift.Actor.From for a person named by Argo CD's own record: a write
// argocd-server made for one of its users.
const SourceArgoCD = "Argo CD"

// ArgoCDServerUser is the user argocd-server writes as: its ServiceAccount in namespace.
func ArgoCDServerUser(namespace string) string {
	return "system:serviceaccount:" + namespace + ":argocd-server"
}

// ArgoCDAction is a write argocd-server made on behalf of one of its users, as argocd-server
// recorded it: a Kubernetes Event on the Application ("alice patched resource apps/Deployment
// 'web'", reason ResourceUpdated; "… deleted resource …", reason ResourceDeleted).
type ArgoCDAction struct {
	User              string // the Argo CD user (a local account, or the SSO email or subject)
	Verb              string // "patch" or "delete"
	Group, Kind, Name string // the resource written
	DestNamespace     string // the Application's destination namespace
	At                time.Time
}

// argoVerbs maps the verbs of argocd-server's messages to the API verbs their writes carry.
var argoVerbs = map[string]struct {
	reason string
	verbs  []string // as the audit log says it, then as admission says it
}{
	"patched": {"ResourceUpdated", []string{"patch", "update"}},
	"deleted": {"ResourceDeleted", []string{"delete"}},
}

// ParseArgoCDEvent reads ev as an ArgoCDAction; ok is false for any other Event, and for an
// action argocd-server recorded without a user ("Unknown user").
func ParseArgoCDEvent(ev *corev1.Event) (a ArgoCDAction, ok bool) {
	if ev.InvolvedObject.Kind != "Application" || ev.Source.Component != "argocd-server" {
		return a, false
	}
	user := ev.Annotations["user"]
	rest, found := strings.CutPrefix(ev.Message, user+" ")
	if user == "" || user == "Unknown user" || !found {
		return a, false
	}
	did, rest, _ := strings.Cut(rest, " resource ")
	v, known := argoVerbs[did]
	if !known || v.reason != ev.Reason {
		return a, false
	}
	gk, name, found := strings.Cut(rest, " '")
	group, kind, slash := strings.Cut(gk, "/")
	if !found || !slash || kind == "" || !strings.HasSuffix(name, "'") {
		return a, false
	}
	a = ArgoCDAction{User: user, Verb: v.verbs[0], Group: group, Kind: kind, Name: strings.TrimSuffix(name, "'"),
		DestNamespace: ev.Annotations["dest-namespace"], At: argoEventTime(ev)}
	return a, true
}

// argoEventTime is when argocd-server recorded ev: its name ends in the nanoseconds it was made
// at, in hex ("<app>.<hex>"); else its first timestamp, which has whole seconds.
func argoEventTime(ev *corev1.Event) time.Time {
	if i := strings.LastIndexByte(ev.Name, '.'); i >= 0 {
		if ns, err := strconv.ParseInt(ev.Name[i+1:], 16, 64); err == nil && ns > 0 {
			t := time.Unix(0, ns).UTC()
			if d := t.Sub(ev.FirstTimestamp.Time); ev.FirstTimestamp.IsZero() || d > -2*time.Second && d < 2*time.Second {
				return t
			}
		}
	}
	return ev.FirstTimestamp.UTC()
}

// ArgoCDWindow is how long after its write argocd-server's record of it may be dated (it
// records the Event once the write returned); records are matched up to 2 s before it too, as
// clocks and whole-second times differ.
const ArgoCDWindow = time.Minute

// maxArgoActions bounds the actions held: the oldest go first.
const maxArgoActions = 4096

// argoRecords are the actions argocd-server recorded, and the users it writes as.
type argoRecords struct {
	mu      sync.Mutex
	servers map[string]bool
	actions []ArgoCDAction // in the order added
}

// SetArgoCDServer names the users argocd-server writes as (ArgoCDServerUser): their writes name
// the Argo CD user who asked for them (ThroughArgoCD).
func (s *Store) SetArgoCDServer(users ...string) {
	s.argo.mu.Lock()
	defer s.argo.mu.Unlock()
	s.argo.servers = map[string]bool{}
	for _, u := range users {
		s.argo.servers[u] = true
	}
}

// AddArgoCD keeps a, an action argocd-server recorded.
func (s *Store) AddArgoCD(a ArgoCDAction) {
	s.argo.mu.Lock()
	defer s.argo.mu.Unlock()
	s.argo.actions = append(s.argo.actions, a)
	if n := len(s.argo.actions); n > maxArgoActions {
		s.argo.actions = append([]ArgoCDAction(nil), s.argo.actions[n-maxArgoActions:]...)
	}
}

// ViaArgoCDServer says whether a is a write argocd-server made whose Argo CD user is not named
// (yet): its record may still come in.
func (s *Store) ViaArgoCDServer(a *drift.Actor) bool {
	if a == nil || a.From == SourceArgoCD {
		return false
	}
	s.argo.mu.Lock()
	defer s.argo.mu.Unlock()
	return s.argo.servers[a.User]
}

// ThroughArgoCD returns a, or, when a is a write argocd-server made (SetArgoCDServer) to the
// object gk namespace/name and argocd-server recorded the action, a copy naming the Argo CD user
// who asked for it: From is SourceArgoCD and Via the ServiceAccount that wrote. The record
// matched is of the same object and verb, dated closest to the write, from 2 s before it to
// ArgoCDWindow after; among equals, one whose Application's destination is namespace. Without a
// record, a is returned as it is.
func (s *Store) ThroughArgoCD(a *drift.Actor, gk schema.GroupKind, namespace, name string) *drift.Actor {
	if a == nil || a.From == SourceArgoCD {
		return a
	}
	at, err := time.Parse(time.RFC3339, a.Time)
	if err != nil {
		return a
	}
	s.argo.mu.Lock()
	defer s.argo.mu.Unlock()
	if !s.argo.servers[a.User] {
		return a
	}
	var best *ArgoCDAction
	score := func(r *ArgoCDAction) (time.Duration, bool) {
		return absDur(r.At.Sub(at.Add(500 * time.Millisecond))), r.DestNamespace == namespace
	}
	for i := range s.argo.actions {
		r := &s.argo.actions[i]
		if r.Group != gk.Group || r.Kind != gk.Kind || r.Name != name || !argoVerbMatches(r.Verb, a.Verb) ||
			r.At.Before(at.Add(-2*time.Second)) || r.At.After(at.Add(ArgoCDWindow)) {
			continue
		}
		if best == nil {
			best = r
			continue
		}
		d, ns := score(r)
		bd, bns := score(best)
		if d < bd || d == bd && ns && !bns {
			best = r
		}
	}
	if best == nil {
		return a
	}
	out := *a
	out.User, out.Groups, out.ImpersonatedUser, out.SourceIPs = best.User, nil, "", nil
	out.Via, out.From = a.Person(), SourceArgoCD
	return &out
}

// argoVerbMatches says whether a write of verb (as its source says it) is one argocd-server's
// action of verb recorded.
func argoVerbMatches(recorded, verb string) bool {
	for _, v := range argoVerbs {
		if v.verbs[0] == recorded {
			for _, w := range v.verbs {
				if w == verb {
					return true
				}
			}
		}
	}
	return false
}
