package audit

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/auditlog"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/live"
)

// attribute names the person behind each drifted field from the audit events held, when any;
// and who created each Extra object and deleted each Missing one.
func (a *Auditor) attribute(objs []drift.Object) {
	if a.People != nil {
		Attribute(objs, a.Live, a.People, a.Options.Applier)
	}
}

// Attribute names, from the audit events people holds, the person behind each drifted field of
// objs (matched by Store.Who against the live object's UID and resourceVersion), who created each
// Extra object and who deleted each Missing one. applier is the GitOps sync's field manager. It
// returns how many were named.
func Attribute(objs []drift.Object, c *live.Cache, people *auditlog.Store, applier string) int {
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
		ref := auditlog.Object{Group: gv.Group, Resource: m.Resource.Resource, Namespace: o.Namespace, Name: o.Name}
		if o.Status == drift.Missing {
			if o.Actor = people.Deleter(ref); o.Actor != nil {
				named++
			}
			continue
		}
		var now auditlog.Live
		if l, ok := c.Get(gvk, o.Namespace, o.Name); ok {
			now = auditlog.Live{UID: string(l.GetUID()), ResourceVersion: l.GetResourceVersion()}
		}
		if o.Status == drift.Extra {
			if o.Actor = people.Creator(ref, now.UID); o.Actor != nil {
				named++
			}
			continue
		}
		for j := range o.Fields {
			if o.Fields[j].Actor = people.Who(ref, now, &o.Fields[j], applier); o.Fields[j].Actor != nil {
				named++
			}
		}
	}
	return named
}
