package audit

import (
	"strings"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/render"
)

// declaredBy maps each object the group's Applications declare to the first that does; the root
// Application to itself (it is bootstrapped by hand, declared by none of them); and, never Extra
// in a group, Argo CD's default project and the other envs' roots and own Applications.
func (a *Auditor) declaredBy(units []*prepared) map[drift.Ref]string {
	out := map[drift.Ref]string{}
	if len(units) == 0 || !units[0].group {
		return out
	}
	app := func(name string) drift.Ref {
		return drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: a.AppNamespace, Name: name}
	}
	out[drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: units[0].appNS, Name: units[0].name}] = units[0].name + " (root)"
	// Argo CD's built-in project, made by its API server; the other envs' roots and Applications.
	out[drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: "AppProject", Namespace: a.AppNamespace, Name: "default"}] = "(Argo CD)"
	for _, env := range a.Envs {
		if env != units[0].env() {
			out[app(a.rootName(env))] = env + " (root)"
			out[app(a.AppName(env))] = env
		}
	}
	for _, u := range units {
		if u.err != nil || u.idx == nil {
			continue
		}
		for _, r := range u.idx.Refs() {
			if _, ok := out[r]; !ok {
				out[r] = u.name
			}
		}
	}
	return out
}

// merge makes the env's report of its Applications' reports: each object named with its
// Application (an object two Applications would report, an Extra one in a namespace both
// manage, once), the revision, pending sync and operation of the env's own Application (else
// the root's), and an entry per Application.
func (a *Auditor) merge(env string, units []*prepared, ex *drift.Excusals) *drift.Report {
	rep := &drift.Report{Env: env, Objects: []drift.Object{}}
	var lead *prepared
	seen := map[drift.Ref]bool{}
	for _, u := range units {
		entry := drift.Application{Name: u.name, Path: render.TargetPath(u.target)}
		if u.app != nil && u.app.Chart != "" {
			entry.Path = "chart " + u.app.Chart + " from " + u.app.RepoURL
		}
		if u.err != nil || u.report == nil {
			if u.err != nil {
				entry.Error = u.err.Error()
				// Not audited is not in sync: the Application stands as an Unknown object of
				// the one that declares it.
				rep.Objects = append(rep.Objects, drift.Object{APIVersion: argocd.ApplicationGVK.GroupVersion().String(),
					Kind: argocd.ApplicationGVK.Kind, Namespace: u.ns(a), Name: u.name, Status: drift.Unknown,
					Fields: []drift.Field{}, Application: u.parent, Note: "not audited: " + u.err.Error()})
				seen[drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: u.ns(a), Name: u.name}] = true
			}
			rep.Applications = append(rep.Applications, entry)
			continue
		}
		if lead == nil || u.main {
			lead = u
		}
		entry.Revision = u.desired
		entry.Objects = u.idx.Len()
		for _, o := range u.report.Objects {
			k := drift.RefOfObject(&o)
			if seen[k] {
				continue
			}
			seen[k] = true
			o.Application = u.name
			if n := disables(&o); n != "" {
				o.Note = strings.TrimPrefix(o.Note+"; "+n, "; ")
			}
			rep.Objects = append(rep.Objects, o)
			entry.Drifted++
		}
		rep.ArgoCDOnly = append(rep.ArgoCDOnly, u.report.ArgoCDOnly...)
		if rep.Operation == nil || u.main {
			if u.report.Operation != nil {
				rep.Operation = u.report.Operation
			}
		}
		rep.Applications = append(rep.Applications, entry)
	}
	if lead != nil {
		rep.Revision = lead.desired
		if lead.head != lead.desired {
			rep.PendingSync, rep.HeadRevision = lead.pending, lead.head
		}
	}
	drift.SortObjects(rep.Objects)
	a.excusals(rep, ex)
	rep.InSync = len(rep.Objects) == 0
	return rep
}

// groupState is what the last full audit of an env's group knew.
type groupState struct {
	units []*prepared // every Application, those that could not be audited too
	ex    *drift.Excusals
}

// keepGroup keeps the group's last full audit for Update, and each unit's for its own lookups.
func (a *Auditor) keepGroup(env string, units []*prepared, ex *drift.Excusals) {
	a.statesMu.Lock()
	defer a.statesMu.Unlock()
	if a.states == nil {
		a.states = map[string]*prepared{}
		a.groups = map[string]*groupState{}
	}
	for k, st := range a.states { // units the group no longer has
		if st.env() == env {
			delete(a.states, k)
		}
	}
	for _, u := range units {
		if u.err == nil {
			a.states[u.key] = u
		}
	}
	a.groups[env] = &groupState{units: units, ex: ex}
}
