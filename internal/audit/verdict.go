package audit

import (
	"context"
	"strings"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
)

// argoVerdicts puts Argo CD's own verdict beside each drifted object and explains where the two
// disagree. An object Argo CD calls OutOfSync that the auditor's comparison passed is drift too:
// it joins the report's objects and is also listed in argocdOnly, so the disagreement stays
// visible.
//
// The verdict is Argo CD's own status (status.resources of the Application, written by its
// controller) when that status compares the revision audited; otherwise — no controller, or a
// comparison with a newer commit not yet synced — Argo CD's diff run in-process. Each verdict
// says which one it is.
func (a *Auditor) argoVerdicts(ctx context.Context, app *argocd.App, desired []*unstructured.Unstructured, overrides map[string]v1alpha1.ResourceOverride, opts *drift.Options, rep *drift.Report) error {
	outOfSync := make([]bool, len(desired))
	sides := make([][2]map[string]any, len(desired)) // Argo CD's predicted and live sides, when it computed them
	source, at := drift.VerdictInProcess, ""
	if st := app.Status; st != nil && st.Revision != rep.Revision {
		// Argo CD runs and has compared another revision (a commit awaiting its sync): it has no
		// verdict on the revision audited, and its diff run here would not be its verdict either.
		for i := range rep.Objects {
			rep.Objects[i].ArgoCD = &drift.ArgoVerdict{Source: drift.VerdictApplicationStatus, ReconciledAt: st.ReconciledAt,
				Note: "Argo CD's status compares " + short(st.Revision) + ", not the synced revision audited: no verdict"}
		}
		return nil
	}
	if st := app.Status; st != nil {
		source, at = drift.VerdictApplicationStatus, st.ReconciledAt
		for i, d := range desired {
			outOfSync[i] = st.Resources[argocd.ResourceKey(d.GroupVersionKind().Group, d.GetKind(), d.GetNamespace(), d.GetName())] == "OutOfSync"
		}
	} else {
		lives := make([]*unstructured.Unstructured, len(desired))
		for i, d := range desired {
			if l, ok := a.Live.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName()); ok {
				lives[i] = l
			}
		}
		verdicts, err := app.OutOfSync(ctx, desired, lives, overrides, a.memo(rep.Env))
		if err != nil {
			return err
		}
		for i, v := range verdicts {
			outOfSync[i], sides[i] = v.OutOfSync, [2]map[string]any{v.Predicted, v.Live}
		}
	}
	argo := map[string]bool{}
	for i, d := range desired {
		argo[key(d.GetKind(), d.GetNamespace(), d.GetName())] = outOfSync[i]
	}
	ours := map[string]bool{}
	for i := range rep.Objects {
		o := &rep.Objects[i]
		k := key(o.Kind, o.Namespace, o.Name)
		ours[k] = true
		v := &drift.ArgoVerdict{OutOfSync: argo[k], Source: source, ReconciledAt: at}
		switch {
		case o.Status == drift.Extra:
			v.Note = "not in Git and not tracked by the Application: Argo CD does not list it"
		case o.Status == drift.Unknown:
			v.Note = "Argo CD cannot compare a kind the cluster does not serve either"
		case !v.OutOfSync && onlyAdded(o):
			v.Note = "fields added by another manager are invisible to Argo CD's diff, which compares only the fields Git declares"
		case !v.OutOfSync && source == drift.VerdictApplicationStatus:
			v.Note = "Argo CD's status (reconciled " + at + ") does not flag this difference"
		case !v.OutOfSync:
			v.Note = "Argo CD's diff (without a server-side dry run) does not flag this difference"
		}
		o.ArgoCD = v
	}
	for i, d := range desired {
		k := key(d.GetKind(), d.GetNamespace(), d.GetName())
		if !outOfSync[i] || ours[k] {
			continue
		}
		if source == drift.VerdictApplicationStatus && a.writtenSince(d, at) {
			// Argo CD compared before the object's last write (its status lags the cluster, as
			// after its own selfHeal): the auditor's comparison of the object as it is now stands.
			continue
		}
		const note = "Argo CD reports OutOfSync where the auditor's comparison found no difference"
		o := drift.Object{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(),
			Status: drift.Modified, Fields: []drift.Field{}, Note: note, ArgoCD: &drift.ArgoVerdict{OutOfSync: true, Note: note, Source: source, ReconciledAt: at}}
		p, l := sides[i][0], sides[i][1]
		if p == nil || l == nil { // Argo CD's status says OutOfSync, not where: show Git against live
			p = d.Object
			if lu, ok := a.Live.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName()); ok {
				l = lu.Object
			}
		}
		if p != nil && l != nil {
			plain := *opts
			plain.Normalizer = nil  // Argo CD's sides are normalised already
			plain.Controllers = nil // show every field Argo CD's sides differ in, a controller's too
			if m := drift.CompareObject(&unstructured.Unstructured{Object: p}, &unstructured.Unstructured{Object: l}, nil, &plain); m != nil {
				o.Fields = m.Fields
			}
		}
		rep.Objects = append(rep.Objects, o)
		rep.ArgoCDOnly = append(rep.ArgoCDOnly, drift.ArgoOnly{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(), Note: note})
	}
	drift.SortObjects(rep.Objects)
	return nil
}

// memo returns env's verdict memo; nil (diff every object) without one.
func (a *Auditor) memo(env string) *argocd.Memo {
	if a.Verdicts == nil {
		return nil
	}
	return a.Verdicts(env)
}

func onlyAdded(o *drift.Object) bool {
	if len(o.Fields) == 0 {
		return false
	}
	for _, f := range o.Fields {
		if f.Change != drift.Added {
			return false
		}
	}
	return true
}

func key(kind, ns, name string) string { return strings.Join([]string{kind, ns, name}, "/") }

func short(rev string) string {
	if len(rev) > 8 {
		return rev[:8]
	}
	return rev
}

// writtenSince says whether the live object of d was written after the time at (RFC 3339, to the
// second, as managedFields keep times): a status reconciled at at may not have seen that write.
func (a *Auditor) writtenSince(d *unstructured.Unstructured, at string) bool {
	l, ok := a.Live.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName())
	if !ok {
		return false
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return true
	}
	for _, e := range l.GetManagedFields() {
		if e.Time != nil && !e.Time.UTC().Before(t) {
			return true
		}
	}
	return false
}
