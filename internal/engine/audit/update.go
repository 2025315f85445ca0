package audit

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// fullAuditKinds change the verdict of objects other than themselves: an autoscaler excuses its
// target's replicas, the Application and argocd-cm say what to ignore and which revision is
// desired. A change to one of them re-audits the whole env.
var fullAuditKinds = []drift.Ref{
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, {Group: "keda.sh", Kind: "ScaledObject"},
}

// Update re-audits only the objects refs name (those a watch saw change) on top of env's last
// full audit, and returns the whole report. The render, the schema, Argo CD's settings and every
// other object's verdict are the last full audit's. An Application of the group whose own
// desired state moved (a new synced revision or chart version, a synced source that is not the
// one audited) is audited again alone, rendered and compared in full, when Git declares it in
// its parent, Argo CD synced that source, it declares no Application, and its render declares
// the same objects as before: what other Applications declare and excuse is then unchanged (AloneAudits counts those).
// It runs a full audit instead when there is none yet, when the branch head moved, when an
// Application that may change the group moved (the root, the env's own, one an ApplicationSet or
// the selection brought in, one that declares Applications, one audited by another replica that
// this one renders for its Applications), or when a ref changes other objects' verdicts (an
// autoscaler, argocd-cm when watched). A CRD's new schema and argocd-cm's customizations when not
// watched are taken up at the next full audit.
func (a *Auditor) Update(ctx context.Context, env string, refs []drift.Ref) (*drift.Report, error) {
	a.state.mu.Lock()
	g := a.state.groups[env]
	a.state.mu.Unlock()
	if g == nil {
		return a.Run(ctx, Request{Env: env})
	}
	again := map[*unit]bool{} // units whose own desired state moved: audited again alone
	for _, u := range g.units {
		if u.err != nil {
			if names(refs, u) {
				return a.Run(ctx, Request{Env: env}) // an Application not audited may be auditable now
			}
			continue
		}
		switch a.fullReason(env, u, refs) {
		case groupMoved:
			return a.Run(ctx, Request{Env: env})
		case ownMoved:
			if !u.leaf(a) {
				return a.Run(ctx, Request{Env: env})
			}
			again[u] = true
		}
	}
	if a.awayMoved(g, refs) {
		return a.Run(ctx, Request{Env: env}) // what it declares may have changed
	}
	if a.mayJoin(env, g.units, refs) {
		return a.Run(ctx, Request{Env: env})
	}
	ex := g.ex.Clone() // the last report's tally, the refs' entries replaced
	var declared map[clusterRef]string
	if len(again) > 0 {
		declared = a.declaredBy(g.units) // the same as the next audit's: an Application audited again declares what it did
	}
	units := make([]*unit, len(g.units))
	for i, u := range g.units {
		units[i] = u
		if u.err != nil {
			continue
		}
		if again[u] {
			next, ok := a.auditAlone(ctx, env, u, declared, ex)
			if !ok {
				return a.Run(ctx, Request{Env: env}) // it declares other objects now, or failed: the full audit says how
			}
			units[i] = next
			continue
		}
		next, err := a.updateUnit(ctx, u, refs, ex)
		if err != nil {
			return nil, err
		}
		units[i] = next
	}
	a.count.updates.Add(1)
	a.count.aloneAudits.Add(int64(len(again)))
	rep := a.merge(env, units, ex)
	a.keepGroup(env, units, g.away, g.heads, ex)
	return rep, nil
}

// awayMoved says whether the branch a root or parent another replica audits tracks moved, or
// the synced revision of one that refs name.
func (a *Auditor) awayMoved(g *groupState, refs []drift.Ref) bool {
	for branch, commit := range g.heads {
		if head, err := a.Repo.Resolve(branch); err != nil || head != commit {
			return true
		}
	}
	for _, r := range refs {
		if r.Group != argocd.ApplicationGVK.Group || r.Kind != argocd.ApplicationGVK.Kind {
			continue
		}
		for _, p := range g.away {
			if p.ns == r.Namespace && p.name == r.Name && a.syncMoved(p) {
				return true
			}
		}
	}
	return false
}

// syncMoved says whether the watch has p's Application at another synced revision than p's
// audit read, or no longer has it. Only what the synced revision is read from is decoded.
func (a *Auditor) syncMoved(p awayApp) bool {
	u, ok := a.Live.Get(argocd.ApplicationGVK, p.ns, p.name)
	if !ok {
		return p.live
	}
	status, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status")
	st, _ := status.(map[string]any)
	slim := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": p.name, "namespace": p.ns}, "spec": u.Object["spec"],
		"status": map[string]any{"sync": st["sync"], "history": st["history"], "operationState": st["operationState"]}}}
	app, err := argocd.FromUnstructured(slim)
	return err != nil || !slices.Equal(app.SyncedRevisions(), p.synced)
}

// AloneAudits is how many times Update audited one Application of a group again alone (its own
// desired state moved) rather than the whole group.
func (a *Auditor) AloneAudits() int64 { return a.count.aloneAudits.Load() }

// leaf says whether u can be audited again alone: an Application Git declares in its parent's
// render (not the root, not the env's own, not one an ApplicationSet or the selection brought in),
// that declares no Argo CD object, generates none, and is audited on this replica.
func (u *unit) leaf(a *Auditor) bool {
	return u.role == roleMember && u.git != nil && u.via == "" && u.self == nil && !u.elsewhere &&
		len(u.generated) == 0 && len(u.ignores) == 0 && u.idx != nil && !declaresArgoObjects(u.idx)
}

// declaresArgoObjects says whether idx declares an Application, an ApplicationSet or an
// AppProject (Argo Rollouts' and Workflows' kinds share their API group and are plain objects).
func declaresArgoObjects(idx *drift.Index) bool {
	return slices.ContainsFunc(idx.Refs(), func(r drift.Ref) bool {
		return slices.Contains(argoKinds, schema.GroupKind{Group: r.Group, Kind: r.Kind})
	})
}

// auditAlone audits Application old of env's group again, in full: its Application as the
// cluster has it now, rendered at its desired revision, compared. declared is what the group
// declares, ex the tally the audit adds to. It says false when the result cannot stand beside
// the group's last audit (the render declares other objects, or another cluster, or the audit
// failed): the full audit must run instead.
func (a *Auditor) auditAlone(ctx context.Context, env string, old *unit, declared map[clusterRef]string, ex *drift.Excusals) (*unit, bool) {
	u := &unit{key: old.key, name: old.name, appNS: old.appNS, target: old.target, parent: old.parent,
		role: old.role, git: old.git, foreign: old.foreign}
	app, err := a.application(ctx, old.ns(a), old.name)
	if err != nil || app == nil || !app.RendersAs(old.git) {
		// Its live spec is not Git's as the parent's last render declared it: a hand edit, or a
		// new spec the parent synced from a commit the group's last audit did not render (its
		// root may be audited by another replica, or its event not read yet). The full audit
		// renders the parent again.
		return nil, false
	}
	u.app = app
	lap, req := a.stopwatch(), Request{Env: env}
	if err := a.prepare(ctx, req, u, lap); err != nil || u.elsewhere || u.clusterName != old.clusterName ||
		len(u.generated) > 0 || len(u.ignores) > 0 || u.idx == nil || !slices.Equal(u.idx.Refs(), old.idx.Refs()) {
		return nil, false
	}
	if err := a.compare(ctx, req, u, declared, ex, lap); err != nil {
		return nil, false
	}
	return u, true
}

// updateUnit re-audits refs on top of one Application's last full audit: its next state.
func (a *Auditor) updateUnit(ctx context.Context, st *unit, refs []drift.Ref, ex *drift.Excusals) (*unit, error) {
	opts := st.opts
	opts.Controllers = a.controllers(unitEnv(st.key))
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
func (u *unit) ns(a *Auditor) string {
	if u.appNS == "" {
		return a.AppNamespace
	}
	return u.appNS
}

// ref names the Application in reports as Argo CD's CLI does: its name, or namespace/name when
// it is outside Argo CD's namespace (two Applications of one name may then be in the group).
func (u *unit) ref(a *Auditor) string {
	if ns := u.ns(a); ns != a.AppNamespace {
		return ns + "/" + u.name
	}
	return u.name
}

// instance is the name Argo CD's tracking ids give the Application: its name, or namespace_name
// when it is outside Argo CD's namespace.
func (u *unit) instance(a *Auditor) string {
	if ns := u.ns(a); ns != a.AppNamespace {
		return ns + "_" + u.name
	}
	return u.name
}

// moved says what of a group moved beyond what incremental audits take up.
type moved int

const (
	nothingMoved moved = iota
	// ownMoved: a unit's own desired state (its Application, its synced revision): the unit is
	// audited again.
	ownMoved
	// groupMoved: what may change other Applications' verdicts or the group's members (an
	// autoscaler, argocd-cm, an Application gone, a root appeared, the branch head): the group is
	// audited again.
	groupMoved
)

// fullReason says whether refs can be re-audited alone on top of st, and what moved if not.
func (a *Auditor) fullReason(env string, st *unit, refs []drift.Ref) moved {
	named := false // this unit's Application; another env's says nothing about this one
	for _, r := range refs {
		if r.Group == argocd.ApplicationGVK.Group && r.Kind == argocd.ApplicationGVK.Kind {
			named = named || r.Namespace == st.ns(a) && r.Name == st.name
			continue
		}
		for _, k := range fullAuditKinds {
			if r.Group == k.Group && r.Kind == k.Kind {
				return groupMoved
			}
		}
		// argocd-cm when it is watched; when it is not (the shipped RBAC lets the auditor get it,
		// not watch it), its resource customizations are read again at the next full audit.
		if r.Group == "" && r.Kind == "ConfigMap" && r.Namespace == a.AppNamespace && r.Name == argocd.ConfigMapName {
			return groupMoved
		}
	}
	// The Application from the watch (when watched): a new synced revision of any source, or a
	// new target revision, is a new desired state, and so is a synced source that is not Git's (a
	// hand edit, a spec its parent synced from a commit not audited yet). Argo CD's comparison at
	// another revision, or failing, changes its verdict on every object. Another write (a refresh,
	// an operation) moves nothing: the objects it touched are re-audited.
	if u, ok := a.Live.Get(argocd.ApplicationGVK, st.ns(a), st.name); ok {
		app, err := argocd.FromUnstructured(u)
		if err != nil || st.app == nil || !app.SyncedAs(st.app) || st.git == nil && app.TargetRevision != st.app.TargetRevision ||
			named && (st.git == nil || !app.RendersAs(st.git) || !app.ComparedAs(st.app)) {
			return ownMoved
		}
	} else if st.live {
		return groupMoved // its Application is gone
	}
	if st.role == roleAlone {
		if _, ok := a.Live.Get(argocd.ApplicationGVK, a.AppNamespace, a.RootName(env)); ok {
			return groupMoved // a root Application appeared: the env is a group now
		}
	}
	if st.app != nil && st.app.Chart != "" || st.foreign {
		// A chart's version, another repository's commit, moves with the Application's synced
		// revision, checked above: the branch head of this repository says nothing of them.
		return nothingMoved
	}
	if _, head, _, err := a.revisions(st.app, Request{Env: env}); err != nil || head != st.head {
		return groupMoved // the branch head moved
	}
	return nothingMoved
}

// names says whether refs name u's Application.
func names(refs []drift.Ref, u *unit) bool {
	return slices.ContainsFunc(refs, func(r drift.Ref) bool {
		return r.Group == argocd.ApplicationGVK.Group && r.Kind == argocd.ApplicationGVK.Kind && r.Name == u.name && r.Namespace == u.appNS
	})
}

// mayJoin says whether refs may change which Applications the group has beyond what Git
// declares: an ApplicationSet changed, or an Application that is not a member changed while the
// group has a selection or an ApplicationSet's Applications (it may be new to either). Only a
// full audit takes such an Application in; re-auditing it alone would call it Extra.
func (a *Auditor) mayJoin(env string, units []*unit, refs []drift.Ref) bool {
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
