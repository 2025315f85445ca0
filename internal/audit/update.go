package audit

import (
	"context"
	"slices"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
)

// envState is what the last full audit of an env knew: enough to re-audit a few objects.
type envState struct {
	app       *argocd.App // nil without an Application
	head      string      // the branch head then
	index     *drift.Index
	unknown   []drift.Object
	opts      drift.Options // with the schema and the normaliser of that audit
	overrides map[string]v1alpha1.ResourceOverride
	report    *drift.Report
}

func (a *Auditor) keep(env string, st *envState) {
	a.statesMu.Lock()
	defer a.statesMu.Unlock()
	if a.states == nil {
		a.states = map[string]*envState{}
	}
	a.states[env] = st
}

// fullAuditKinds change the verdict of objects other than themselves: an autoscaler excuses its
// target's replicas, the Application and argocd-cm say what to ignore and which revision is
// desired. A change to one of them re-audits the whole env.
var fullAuditKinds = []drift.Ref{
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, {Group: "keda.sh", Kind: "ScaledObject"},
}

// Update re-audits only the objects refs name (those a watch saw change) on top of env's last
// full audit, and returns the whole report. The render, the schema, Argo CD's settings and every
// other object's verdict are the last full audit's. It runs a full audit instead when there is
// none yet, when the Application or the branch head moved since (a new desired revision), or
// when a ref changes other objects' verdicts (an autoscaler, the env's Application, argocd-cm
// when watched). A CRD's new schema and argocd-cm's customizations when not watched are taken
// up at the next full audit.
func (a *Auditor) Update(ctx context.Context, env string, refs []drift.Ref) (*drift.Report, error) {
	a.statesMu.Lock()
	st := a.states[env]
	a.statesMu.Unlock()
	if st == nil || a.needsFull(env, st, refs) {
		return a.Run(ctx, Request{Env: env})
	}
	a.updates.Add(1)
	opts := st.opts
	opts.Controllers = a.Options.Controllers
	opts.Excused = st.opts.Excused.Clone() // the last report's tally, the refs' entries replaced
	opts.Events = a.events()
	objs := drift.AuditRefs(st.index, refs, a.Live, opts)
	part := &drift.Report{Env: env, Revision: st.report.Revision, Objects: objs}
	// Argo CD's status as the watch has it now (the spec is the full audit's: a new one would
	// have made this a full audit).
	app := st.app
	if u, ok := a.Live.Get(argocd.ApplicationGVK, a.AppNamespace, a.AppName(env)); ok && app != nil {
		if fresh, err := argocd.FromUnstructured(u); err == nil {
			app = fresh
		}
	}
	if app != nil {
		var declared []drift.Ref
		seen := map[drift.Ref]bool{}
		for _, r := range refs {
			if st.index.Has(r) && !seen[r] {
				seen[r] = true
				declared = append(declared, r)
			}
		}
		// The memo is not rotated here (Done): it keeps every other object's verdict.
		if err := a.argoVerdicts(ctx, app, st.index, declared, st.overrides, &opts, part); err != nil {
			return nil, err
		}
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
	a.attribute(part.Objects)
	a.excusals(&rep, opts.Excused)
	rep.Objects = append(rep.Objects, part.Objects...)
	drift.SortObjects(rep.Objects)
	rep.ArgoCDOnly = slices.DeleteFunc(slices.Clone(prev.ArgoCDOnly), func(o drift.ArgoOnly) bool {
		return touched[drift.RefOfObject(&drift.Object{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})]
	})
	rep.ArgoCDOnly = append(rep.ArgoCDOnly, part.ArgoCDOnly...)
	if len(rep.ArgoCDOnly) == 0 {
		rep.ArgoCDOnly = nil
	}
	rep.InSync = len(rep.Objects) == 0
	rep.Operation = nil
	if app != nil && (app.InProgress() || app.Failed()) {
		rep.Operation = &drift.Operation{Phase: app.Operation.Phase, Revision: app.Operation.Revision, Message: app.Operation.Message}
	}
	next := *st
	next.opts.Excused = opts.Excused
	next.report = &rep
	a.keep(env, &next)
	return &rep, nil
}

// needsFull says whether refs cannot be re-audited alone on top of st.
func (a *Auditor) needsFull(env string, st *envState, refs []drift.Ref) bool {
	for _, r := range refs {
		if r.Group == argocd.ApplicationGVK.Group && r.Kind == argocd.ApplicationGVK.Kind {
			if r.Namespace == a.AppNamespace && r.Name == a.AppName(env) {
				return true // this env's Application; another env's says nothing about this one
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
	if u, ok := a.Live.Get(argocd.ApplicationGVK, a.AppNamespace, a.AppName(env)); ok {
		app, err := argocd.FromUnstructured(u)
		if err != nil || st.app == nil || app.SyncedRevision != st.app.SyncedRevision || app.TargetRevision != st.app.TargetRevision {
			return true
		}
	} else if st.app != nil {
		return true
	}
	_, head, _, err := a.revisions(st.app, Request{Env: env})
	return err != nil || head != st.head
}
