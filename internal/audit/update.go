package audit

import (
	"context"
	"slices"
	"strings"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
)

// fullAuditKinds change the verdict of objects other than themselves: an autoscaler excuses its
// target's replicas, the Application and argocd-cm say what to ignore and which revision is
// desired. A change to one of them re-audits the whole env.
var fullAuditKinds = []drift.Ref{
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, {Group: "keda.sh", Kind: "ScaledObject"},
}

// Update re-audits only the objects refs name (those a watch saw change) on top of env's last
// full audit, and returns the whole report. The render, the schema, Argo CD's settings and every
// other object's verdict are the last full audit's. It runs a full audit instead when there is
// none yet, when an Application of the group or the branch head moved since (a new desired
// revision), or when a ref changes other objects' verdicts (an autoscaler, an Application of the
// group, argocd-cm when watched). A CRD's new schema and argocd-cm's customizations when not
// watched are taken up at the next full audit.
func (a *Auditor) Update(ctx context.Context, env string, refs []drift.Ref) (*drift.Report, error) {
	a.statesMu.Lock()
	g := a.groups[env]
	a.statesMu.Unlock()
	if g == nil {
		return a.Run(ctx, Request{Env: env})
	}
	for _, u := range g.units {
		if u.err != nil && names(refs, u) || u.err == nil && a.needsFull(env, u, refs) {
			return a.Run(ctx, Request{Env: env}) // an Application not audited may be auditable now
		}
	}
	if a.mayJoin(env, g.units, refs) {
		return a.Run(ctx, Request{Env: env})
	}
	a.updates.Add(1)
	ex := g.ex.Clone() // the last report's tally, the refs' entries replaced
	units := make([]*prepared, len(g.units))
	for i, u := range g.units {
		units[i] = u
		if u.err != nil {
			continue
		}
		next, err := a.updateUnit(ctx, u, refs, ex)
		if err != nil {
			return nil, err
		}
		units[i] = next
	}
	rep := a.merge(env, units, ex)
	a.keepGroup(env, units, ex)
	return rep, nil
}

// updateUnit re-audits refs on top of one Application's last full audit: its next state.
func (a *Auditor) updateUnit(ctx context.Context, st *prepared, refs []drift.Ref, ex *drift.Excusals) (*prepared, error) {
	opts := st.opts
	opts.Controllers = a.Options.Controllers
	opts.Excused = ex
	opts.Events = a.events(st.on(a), st.clusterName)
	objs := drift.AuditRefs(st.idx, refs, st.on(a), opts)
	part := &drift.Report{Env: st.key, Revision: st.report.Revision, Objects: objs}
	// Argo CD's status as the watch has it now (the spec is the full audit's: a new one would
	// have made this a full audit).
	app := st.app
	if u, ok := a.Live.Get(argocd.ApplicationGVK, st.ns(a), st.name); ok && app != nil {
		if fresh, err := argocd.FromUnstructured(u); err == nil {
			app = fresh
			if st.git != nil {
				app = fresh.WithGitSpec(st.git)
			}
		}
	}
	if app != nil {
		var declared []drift.Ref
		seen := map[drift.Ref]bool{}
		for _, r := range refs {
			if st.idx.Has(r) && !seen[r] {
				seen[r] = true
				declared = append(declared, r)
			}
		}
		// The memo is not rotated here (Done): it keeps every other object's verdict.
		if err := a.argoVerdicts(ctx, st.on(a), app, st.idx, st.withoutGenerated(declared), st.overrides, &opts, part); err != nil {
			return nil, err
		}
		st.generatedVerdicts(part.Objects)
	}
	touched := map[drift.Ref]bool{}
	for _, r := range refs {
		touched[r] = true
	}
	prev := st.report
	rep := *prev
	// Unknown objects (kinds or namespaces the audit cannot read) stay as the full audit found
	// them: an event on a served object of the same name does not speak for them.
	rep.Objects = slices.DeleteFunc(slices.Clone(prev.Objects), func(o drift.Object) bool {
		return o.Status != drift.Unknown && touched[drift.RefOfObject(&o)]
	})
	a.attribute(st.on(a), st.clusterName, part.Objects, &opts)
	rep.Objects = append(rep.Objects, part.Objects...)
	drift.SortObjects(rep.Objects)
	rep.ArgoCDOnly = slices.DeleteFunc(slices.Clone(prev.ArgoCDOnly), func(o drift.ArgoOnly) bool {
		return touched[drift.RefOfObject(&drift.Object{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})]
	})
	rep.ArgoCDOnly = append(rep.ArgoCDOnly, part.ArgoCDOnly...)
	if len(rep.ArgoCDOnly) == 0 {
		rep.ArgoCDOnly = nil
	}
	rep.Operation = nil
	if app != nil && (app.InProgress() || app.Failed()) {
		rep.Operation = &drift.Operation{Phase: app.Operation.Phase, Revision: app.Operation.Revision, Message: app.Operation.Message}
	}
	next := *st
	next.opts.Excused = ex
	next.report = &rep
	return &next, nil
}

// ns is the namespace of the unit's Application.
func (u *prepared) ns(a *Auditor) string {
	if u.appNS == "" {
		return a.AppNamespace
	}
	return u.appNS
}

// ref names the Application in reports as Argo CD's CLI does: its name, or namespace/name when
// it is outside Argo CD's namespace (two Applications of one name may then be in the group).
func (u *prepared) ref(a *Auditor) string {
	if ns := u.ns(a); ns != a.AppNamespace {
		return ns + "/" + u.name
	}
	return u.name
}

// instance is the name Argo CD's tracking ids give the Application: its name, or namespace_name
// when it is outside Argo CD's namespace.
func (u *prepared) instance(a *Auditor) string {
	if ns := u.ns(a); ns != a.AppNamespace {
		return ns + "_" + u.name
	}
	return u.name
}

// needsFull says whether refs cannot be re-audited alone on top of st.
func (a *Auditor) needsFull(env string, st *prepared, refs []drift.Ref) bool {
	for _, r := range refs {
		if r.Group == argocd.ApplicationGVK.Group && r.Kind == argocd.ApplicationGVK.Kind {
			if r.Namespace == st.ns(a) && r.Name == st.name {
				return true // this unit's Application; another env's says nothing about this one
			}
			continue
		}
		for _, k := range fullAuditKinds {
			if r.Group == k.Group && r.Kind == k.Kind {
				return true
			}
		}
		// argocd-cm when it is watched; when it is not (the shipped RBAC lets the auditor get it,
		// not watch it), its resource customizations are read again at the next full audit.
		if r.Group == "" && r.Kind == "ConfigMap" && r.Namespace == a.AppNamespace && r.Name == argocd.ConfigMapName {
			return true
		}
	}
	// The Application from the watch (when watched): a new synced or target revision is a new
	// desired state.
	if u, ok := a.Live.Get(argocd.ApplicationGVK, st.ns(a), st.name); ok {
		app, err := argocd.FromUnstructured(u)
		if err != nil || st.app == nil || app.SyncedRevision != st.app.SyncedRevision || st.git == nil && app.TargetRevision != st.app.TargetRevision {
			return true
		}
	} else if st.live {
		return true // its Application is gone
	}
	if st.main && !st.group {
		if _, ok := a.Live.Get(argocd.ApplicationGVK, a.AppNamespace, a.RootName(env)); ok {
			return true // a root Application appeared: the env is a group now
		}
	}
	if st.app != nil && st.app.Chart != "" {
		return false // a chart's version moves with the Application's synced revision, checked above
	}
	_, head, _, err := a.revisions(st.app, Request{Env: env})
	return err != nil || head != st.head
}

// names says whether refs name u's Application.
func names(refs []drift.Ref, u *prepared) bool {
	return slices.ContainsFunc(refs, func(r drift.Ref) bool {
		return r.Group == argocd.ApplicationGVK.Group && r.Kind == argocd.ApplicationGVK.Kind && r.Name == u.name && r.Namespace == u.appNS
	})
}

// mayJoin says whether refs may change which Applications the group has beyond what Git
// declares: an ApplicationSet changed, or an Application that is not a member changed while the
// group has a selection or an ApplicationSet's Applications (it may be new to either). Only a
// full audit takes such an Application in; re-auditing it alone would call it Extra.
func (a *Auditor) mayJoin(env string, units []*prepared, refs []drift.Ref) bool {
	open := a.selection(env) != nil
	member := map[string]bool{}
	for _, u := range units {
		member[u.ns(a)+"/"+u.name] = true
		open = open || strings.HasPrefix(u.via, "ApplicationSet ")
	}
	for _, r := range refs {
		if r.Group != argocd.ApplicationGVK.Group {
			continue
		}
		switch {
		case r.Kind == ApplicationSetGVK.Kind:
			return true
		case r.Kind == argocd.ApplicationGVK.Kind && open && !member[r.Namespace+"/"+r.Name]:
			return true
		}
	}
	return false
}
