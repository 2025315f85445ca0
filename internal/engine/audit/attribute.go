package audit

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// attribute names the person behind each drifted field from the audit events held, when any;
// and who created each Extra object and deleted each Missing one.
func (a *Auditor) attribute(c *live.Cache, cluster string, objs []drift.Object, opts *drift.Options) {
	if a.People == nil {
		return
	}
	AttributeOn(cluster, objs, c, a.People, a.Options.Applier)
	// A person found behind a write under a controller's name the comparison excused or could not
	// yet check (its event came in after), or that Argo CD's verdict brought back: named as such.
	check := *opts
	if check.Autoscaled == nil {
		check.Autoscaled = drift.AutoscaledIn(c)
	}
	for i := range objs {
		o := &objs[i]
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			continue
		}
		for j := range o.Fields {
			o.Fields[j].Borrowed = check.BorrowedName(gv.WithKind(o.Kind).GroupKind(), o.Namespace, o.Name, &o.Fields[j])
		}
	}
}

// Attribute names, from the audit events people holds, the person behind each drifted field of
// objs (matched by Store.Who against the live object's UID and resourceVersion), who created each
// Extra object and who deleted each Missing one. applier is the GitOps sync's field manager. It
// returns how many were named.
func Attribute(objs []drift.Object, c *live.Cache, people *auditlog.Store, applier string) int {
	return AttributeOn("", objs, c, people, applier)
}

// AttributeOn is Attribute for the objects of cluster ("" for Argo CD's own), read by c: only
// that cluster's audit events name their people.
func AttributeOn(cluster string, objs []drift.Object, c *live.Cache, people *auditlog.Store, applier string) int {
	named := 0
	for i := range objs {
		o := &objs[i]
		switch {
		case o.Status == drift.Missing, o.Status == drift.Extra:
		case o.Status != drift.Modified || len(o.Fields) == 0:
			continue
		}
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			continue
		}
		gvk := gv.WithKind(o.Kind)
		m, err := c.Mapping(gvk)
		if err != nil {
			continue
		}
		ref := auditlog.Object{Cluster: cluster, Group: gv.Group, Resource: m.Resource.Resource, Namespace: o.Namespace, Name: o.Name}
		// A write argocd-server made names the Argo CD user who asked, when Argo CD recorded it.
		via := func(a *drift.Actor) *drift.Actor {
			return people.ThroughArgoCD(a, gvk.GroupKind(), o.Namespace, o.Name)
		}
		if o.Status == drift.Missing {
			if o.Actor = via(people.Deleter(ref)); o.Actor != nil {
				named++
			}
			continue
		}
		var now auditlog.Live
		if l, ok := c.Get(gvk, o.Namespace, o.Name); ok {
			now = auditlog.Live{UID: string(l.GetUID()), ResourceVersion: l.GetResourceVersion()}
		}
		if o.Status == drift.Extra {
			if o.Actor = via(people.Creator(ref, now.UID)); o.Actor != nil {
				named++
			}
			continue
		}
		for j := range o.Fields {
			if o.Fields[j].Actor = via(people.Who(ref, now, &o.Fields[j], applier)); o.Fields[j].Actor != nil {
				named++
			}
		}
	}
	return named
}

// events answers the comparison's questions about writers (drift.Events) from the audit events
// held about the objects of c; nil without them.
func (a *Auditor) events(c *live.Cache, cluster string) drift.Events {
	if a.People == nil {
		return nil
	}
	return &events{c: c, cluster: cluster, people: a.People, applier: a.Options.Applier}
}

type events struct {
	c       *live.Cache
	cluster string
	people  *auditlog.Store
	applier string
}

func (e *events) object(l *unstructured.Unstructured) (auditlog.Object, bool) {
	gvk := l.GroupVersionKind()
	m, err := e.c.Mapping(gvk)
	if err != nil {
		return auditlog.Object{}, false
	}
	return auditlog.Object{Cluster: e.cluster, Group: gvk.Group, Resource: m.Resource.Resource, Namespace: l.GetNamespace(), Name: l.GetName()}, true
}

// WriterOf is drift.Events.WriterOf.
func (e *events) WriterOf(l *unstructured.Unstructured, f *drift.Field) *drift.Actor {
	ref, ok := e.object(l)
	if !ok {
		return nil
	}
	a := e.people.Who(ref, auditlog.Live{UID: string(l.GetUID()), ResourceVersion: l.GetResourceVersion()}, f, e.applier)
	return e.people.ThroughArgoCD(a, l.GroupVersionKind().GroupKind(), l.GetNamespace(), l.GetName())
}

// CreatorOf is drift.Events.CreatorOf.
func (e *events) CreatorOf(l *unstructured.Unstructured) *drift.Actor {
	ref, ok := e.object(l)
	if !ok {
		return nil
	}
	return e.people.ThroughArgoCD(e.people.Creator(ref, string(l.GetUID())), l.GroupVersionKind().GroupKind(), l.GetNamespace(), l.GetName())
}

// UnverifiedWait is how long after a write excused on a controller's name alone the audit
// events may still bring who made it.
const UnverifiedWait = 10 * time.Second

// excusals puts what controller rules excused into the report, and says when they were taken on
// field-manager names alone.
func (a *Auditor) excusals(rep *drift.Report, ex *drift.Excusals) {
	rep.Excused = ex.Summary()
	rep.Notes = nil
	var named []string
	total := 0
	for _, e := range rep.Excused {
		if n := e.Fields - e.Verified; n > 0 {
			named = append(named, fmt.Sprintf("%s %d", e.Manager, n))
			total += n
		}
	}
	if total == 0 {
		return
	}
	why := "no audit events are configured"
	if a.People != nil {
		why = "no audit event names who wrote them"
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("controller rules excused %d fields on the field-manager name alone (%s): %s; a person writing under that name would not be told apart",
		total, strings.Join(named, ", "), why))
	if a.People != nil {
		rep.Unverified = ex.Unverified(time.Now().Add(-UnverifiedWait))
	}
}
