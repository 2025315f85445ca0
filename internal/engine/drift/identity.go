package drift

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Events answers, from the API server's audit events, who really made a write: a field
// manager's name is chosen by the client, the authenticated user is not.
type Events interface {
	// WriterOf returns who made the write that left field f of live as it is (nil: no event says).
	WriterOf(live *unstructured.Unstructured, f *Field) *Actor
	// CreatorOf returns who created live (nil: no event says).
	CreatorOf(live *unstructured.Unstructured) *Actor
}

// DefaultIdentities are the users the platform's controllers authenticate as, by the field
// manager they write under (path.Match patterns). kube-controller-manager runs as its own user,
// or as one service account per controller with --use-service-account-credentials.
var DefaultIdentities = map[string][]string{
	"kube-controller-manager": {"system:kube-controller-manager",
		"system:serviceaccount:kube-system:horizontal-pod-autoscaler", "system:serviceaccount:kube-system:deployment-controller",
		"system:serviceaccount:kube-system:persistent-volume-binder", "system:serviceaccount:kube-system:statefulset-controller",
		"system:serviceaccount:kube-system:pvc-protection-controller", "system:serviceaccount:kube-system:job-controller",
		"system:serviceaccount:kube-system:cronjob-controller"},
	"kube-scheduler":                        {"system:kube-scheduler"},
	"keda-operator":                         {"system:serviceaccount:keda:keda-operator"},
	"karpenter":                             {"system:serviceaccount:karpenter:karpenter", "system:serviceaccount:kube-system:karpenter"},
	"cloudnative-pg":                        {"system:serviceaccount:cnpg-system:cnpg-manager", "system:serviceaccount:cnpg-system:cnpg-cloudnative-pg"},
	"manager":                               {"system:serviceaccount:cnpg-system:cnpg-manager", "system:serviceaccount:cnpg-system:cnpg-cloudnative-pg"},
	"argocd-controller":                     {"system:serviceaccount:argocd:argocd-application-controller"},
	"argocd-application-controller":         {"system:serviceaccount:argocd:argocd-application-controller"},
	"argocd-server":                         {"system:serviceaccount:argocd:argocd-server"},
	"argocd-notifications-controller":       {"system:serviceaccount:argocd:argocd-notifications-controller"},
	"cert-manager-certificates-issuing":     {"system:serviceaccount:cert-manager:cert-manager"},
	"cert-manager-certificates-key-manager": {"system:serviceaccount:cert-manager:cert-manager"},
	"external-secrets":                      {"system:serviceaccount:external-secrets:external-secrets"},
	"pilot-discovery":                       {"system:serviceaccount:istio-system:istiod"},
}

// identity is who may write under a manager's name: user patterns (path.Match).
type identity []string

// Matches says whether the write's actor is the identity. A write made as someone else (kubectl
// --as) is a person's, whoever they acted as.
func (id identity) Matches(a *Actor) bool {
	if a.ImpersonatedUser != "" {
		return false
	}
	for _, p := range id {
		if ok, _ := path.Match(p, a.User); ok {
			return true
		}
	}
	return false
}

// identityOf returns who may write under manager's name: the rule's users, else the options'
// or the default identities of that manager.
func (opts *Options) identityOf(manager string, r *ControllerRule) identity {
	if r != nil && len(r.Users) > 0 {
		return r.Users
	}
	if ids, ok := opts.Identities[manager]; ok {
		return ids
	}
	return DefaultIdentities[manager]
}

// borrowedNote says that a person wrote under a controller's name.
func borrowedNote(manager string, a *Actor) string {
	return fmt.Sprintf("written under %s's name by %s, not by that controller", manager, a.Person())
}

// Excusal counts the fields controller rules excused under one manager's name.
type Excusal struct {
	Manager string `json:"manager"`
	Fields  int    `json:"fields"`
	// Verified is how many of them the audit events showed were written by the controller's own
	// identity; the rest were taken on the manager's name alone.
	Verified int `json:"verified"`
}

// Excusals tallies, per object, the fields controller rules excused: a full audit fills a new
// one, an incremental audit replaces the entries of the objects it compares again. It is safe
// for concurrent use.
type Excusals struct {
	mu    sync.Mutex
	byRef map[exKey]map[string]*excused
}

// exKey is an object on its cluster ("" for Argo CD's own).
type exKey struct {
	cluster string
	ref     Ref
}

type excused struct {
	fields, verified int
	latest           time.Time // the newest unverified write
	undated          bool      // an unverified write managedFields gives no time (scale writes)
	fingerprint      string    // the unverified fields and their values, as compared
}

// NewExcusals returns an empty tally.
func NewExcusals() *Excusals { return &Excusals{byRef: map[exKey]map[string]*excused{}} }

func (e *Excusals) reset(cluster string, r Ref) {
	if e == nil {
		return
	}
	e.mu.Lock()
	delete(e.byRef, exKey{cluster, r})
	e.mu.Unlock()
}

func (e *Excusals) add(cluster string, r Ref, manager string, verified bool, at time.Time, fingerprint string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := exKey{cluster, r}
	m := e.byRef[k]
	if m == nil {
		m = map[string]*excused{}
		e.byRef[k] = m
	}
	x := m[manager]
	if x == nil {
		x = &excused{}
		m[manager] = x
	}
	x.fields++
	switch {
	case verified:
		x.verified++
	case fingerprint == "": // never to be verified: no recheck
	case at.IsZero():
		x.undated = true
		x.fingerprint += fingerprint + ";"
	case at.After(x.latest):
		x.latest = at
		x.fingerprint += fingerprint + ";"
	default:
		x.fingerprint += fingerprint + ";"
	}
}

// Clone returns a copy to go on from (an incremental audit's).
func (e *Excusals) Clone() *Excusals {
	c := NewExcusals()
	if e == nil {
		return c
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for r, m := range e.byRef {
		cm := make(map[string]*excused, len(m))
		for k, v := range m {
			x := *v
			cm[k] = &x
		}
		c.byRef[r] = cm
	}
	return c
}

// Summary returns the tally by manager, sorted.
func (e *Excusals) Summary() []Excusal {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	by := map[string]*Excusal{}
	for _, m := range e.byRef {
		for mgr, x := range m {
			s := by[mgr]
			if s == nil {
				s = &Excusal{Manager: mgr}
				by[mgr] = s
			}
			s.Fields += x.fields
			s.Verified += x.verified
		}
	}
	out := make([]Excusal, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Excusal) int { return strings.Compare(a.Manager, b.Manager) })
	return out
}

// Unverified returns the objects with a field excused on a manager's name alone whose write is
// newer than since, or has no time (managedFields dates no scale write): the audit event of that
// write may not have arrived yet. A caller bounds how long it waits for one.
func (e *Excusals) Unverified(since time.Time) []Unverified {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Unverified
	for k, m := range e.byRef {
		for _, x := range m {
			if x.fields > x.verified && (x.undated || x.latest.After(since)) {
				out = append(out, Unverified{Ref: k.ref, Cluster: k.cluster, Fingerprint: x.fingerprint})
				break
			}
		}
	}
	return out
}

// Unverified is an object with a field excused on a manager's name alone, as it was compared:
// Fingerprint names those fields and their values, so a new write there is told from a status
// write that moved only the resourceVersion.
type Unverified struct {
	Ref
	// Cluster is the object's cluster, "" for Argo CD's own.
	Cluster     string `json:",omitempty"`
	Fingerprint string
}

// BorrowedName returns the controller whose field-manager name field f of the object (gk,
// namespace, name) was written under by someone else: a controller rule of the options covers
// the field under its writer's name, the controller's identity is known, and f's actor is not
// it. "" otherwise (no actor yet, no rule, or the controller itself). It names what the
// comparison could not when it ran before the write's audit event arrived, or ran without the
// controller rules (Argo CD's verdict shown field by field).
func (opts *Options) BorrowedName(gk schema.GroupKind, namespace, name string, f *Field) string {
	if f.Actor == nil || f.Borrowed != "" || f.Manager == "" {
		return f.Borrowed
	}
	o := &owner{Manager: f.Manager, Operation: f.Operation, Subresource: f.Subresource}
	p := f.FieldPath.Path()
	borrowed := ""
	for i := range opts.Controllers {
		r := &opts.Controllers[i]
		if !r.matches(gk, o, p) || r.Autoscaled && (opts.Autoscaled == nil || !opts.Autoscaled(gk, namespace, name)) {
			continue
		}
		if id := opts.identityOf(o.Manager, r); len(id) == 0 || id.Matches(f.Actor) {
			return "" // no identity to check, or the controller itself
		}
		borrowed = o.Manager // another rule for this manager may name the actor among its users
	}
	return borrowed
}
