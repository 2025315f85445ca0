package audit

import (
	"context"
	"fmt"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// verdictBatch is how many objects (Git's and the cluster's) argoVerdicts decodes at a time.
const verdictBatch = 250

// argoVerdicts puts Argo CD's own verdict beside each drifted object and explains where the two
// disagree. An object Argo CD calls OutOfSync that the auditor's comparison passed is drift too:
// it joins the report's objects and is also listed in argocdOnly, so the disagreement stays
// visible.
//
// The verdict is Argo CD's own status (status.resources of the Application, written by its
// controller) when that status compares the revision audited. Where Argo CD runs but has no
// verdict on it (it compared a newer commit awaiting its sync, it could not compare, or it could
// not compare one resource), the object says "none" — and objects only Argo CD flagged at the
// audited revision stay as they were. Where no controller has compared anything (no Argo CD),
// Argo CD's diff runs in-process. Each verdict says which one it is.
//
// refs name the objects of idx to give a verdict on; each is decoded only while its verdict is
// made.
func (a *Auditor) argoVerdicts(ctx context.Context, c *live.Cache, app *argocd.App, idx *drift.Index, refs []drift.Ref, overrides map[string]v1alpha1.ResourceOverride, opts *drift.Options, rep *drift.Report) error {
	if st := app.Status; st != nil && (st.Revision != rep.Revision || st.Error != "") {
		note := "Argo CD's status compares " + gitrepo.Short(st.Revision) + ", not the synced revision audited: no verdict"
		if st.Error != "" {
			note = "Argo CD could not compare (" + st.Error + "): no verdict"
		}
		for i := range rep.Objects {
			rep.Objects[i].ArgoCD = &drift.ArgoVerdict{Source: drift.VerdictNone, ReconciledAt: st.ReconciledAt, Note: note}
		}
		a.keepArgoOnly(rep, refs)
		return nil
	}
	outOfSync := make([]bool, len(refs))
	unknown := make([]bool, len(refs))
	sides := make([][2]map[string]any, len(refs)) // Argo CD's predicted and live sides, when it computed them
	source, at := drift.VerdictInProcess, ""
	if st := app.Status; st != nil {
		source, at = drift.VerdictApplicationStatus, st.ReconciledAt
		for i, r := range refs {
			switch st.Resources[argocd.ResourceKey(r.Group, r.Kind, r.Namespace, r.Name)] {
			case "OutOfSync":
				outOfSync[i] = true
			case "Synced":
			default: // Unknown (Argo CD could not compare it), or not listed
				unknown[i] = true
			}
		}
	} else {
		// Each object's verdict stands alone, so both sides are decoded a batch at a time: all
		// 10,000 live objects of a large env at once held ~110 MB of heap for the length of the
		// diff.
		for lo := 0; lo < len(refs); lo += verdictBatch {
			part := make([]*unstructured.Unstructured, 0, verdictBatch)
			for _, r := range refs[lo:min(lo+verdictBatch, len(refs))] {
				d, ok := idx.Desired(r)
				if !ok {
					return fmt.Errorf("%s/%s %s/%s is not in the render audited", r.Group, r.Kind, r.Namespace, r.Name)
				}
				part = append(part, d)
			}
			lives := make([]*unstructured.Unstructured, len(part))
			for i, d := range part {
				if l, ok := c.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName()); ok {
					lives[i] = l
				}
			}
			verdicts, err := app.OutOfSync(ctx, part, lives, overrides, a.memo(rep.Env))
			if err != nil {
				return err
			}
			for i, v := range verdicts {
				outOfSync[lo+i], sides[lo+i] = v.OutOfSync, [2]map[string]any{v.Predicted, v.Live}
			}
		}
	}
	argo, none := map[drift.Ref]bool{}, map[drift.Ref]bool{}
	for i, r := range refs {
		argo[r], none[r] = outOfSync[i], unknown[i]
	}
	ours := map[drift.Ref]bool{}
	for i := range rep.Objects {
		o := &rep.Objects[i]
		k := drift.RefOfObject(o)
		ours[k] = true
		v := &drift.ArgoVerdict{OutOfSync: argo[k], Source: source, ReconciledAt: at}
		switch {
		case o.Status == drift.Extra:
			v.Note = "not in Git and not tracked by the Application: Argo CD does not list it"
		case o.Status == drift.Unknown:
			v.Note = "Argo CD cannot compare a kind the cluster does not serve either"
		case none[k]:
			v.Source, v.Note = drift.VerdictNone, "Argo CD's status has no verdict on this object (Unknown, or not listed)"
		case !v.OutOfSync && onlyAdded(o):
			v.Note = "fields added by another manager are invisible to Argo CD's diff, which compares only the fields Git declares"
		case !v.OutOfSync && source == drift.VerdictApplicationStatus:
			v.Note = "Argo CD's status (reconciled " + at + ") does not flag this difference"
		case !v.OutOfSync:
			v.Note = "Argo CD's diff (without a server-side dry run) does not flag this difference"
		}
		o.ArgoCD = v
	}
	for i, r := range refs {
		if !outOfSync[i] || ours[r] {
			continue
		}
		d, ok := idx.Desired(r)
		if !ok {
			continue
		}
		if source == drift.VerdictApplicationStatus && a.lastWrittenByApplier(c, d, opts.Applier) {
			// The last write was the sync's own (Argo CD's selfHeal, say) and the auditor finds
			// no difference now: Argo CD's status, which lags the cluster, predates that write.
			continue
		}
		o := drift.Object{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(),
			Status: drift.Modified, Fields: []drift.Field{}, Note: argoOnlyNote, ArgoCD: &drift.ArgoVerdict{OutOfSync: true, Note: argoOnlyNote, Source: source, ReconciledAt: at}}
		cmpOpts := *opts      // Argo CD's status says OutOfSync, not where: show Git against live, as the audit compares
		cmpOpts.Excused = nil // what this comparison excuses is not the audit's
		cmpOpts.IgnoreOwnership = true
		if cmpOpts.Autoscaled == nil {
			cmpOpts.Autoscaled = drift.AutoscaledIn(c)
		}
		p, l := sides[i][0], sides[i][1]
		if p != nil && l != nil {
			cmpOpts.Normalizer = nil  // Argo CD's sides are normalised already
			cmpOpts.Controllers = nil // show every field Argo CD's sides differ in, a controller's too
		} else if lu, ok := c.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName()); ok {
			p, l = d.Object, lu.Object
		}
		if p != nil && l != nil {
			if m := drift.CompareObject(&unstructured.Unstructured{Object: p}, &unstructured.Unstructured{Object: l}, nil, &cmpOpts); m != nil {
				o.Fields = m.Fields
			}
		}
		rep.Objects = append(rep.Objects, o)
		rep.ArgoCDOnly = append(rep.ArgoCDOnly, drift.ArgoOnly{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(), Note: argoOnlyNote})
	}
	drift.SortObjects(rep.Objects)
	return nil
}

const argoOnlyNote = drift.ArgoCDOnlyNote

// keepArgoOnly carries the objects only Argo CD flagged in the env's last full audit of the same
// revision into rep, when Argo CD has no verdict now: no verdict is not a resolution.
func (a *Auditor) keepArgoOnly(rep *drift.Report, refs []drift.Ref) {
	a.state.mu.Lock()
	st := a.state.units[rep.Env]
	a.state.mu.Unlock()
	if st == nil || st.report == nil || st.report.Revision != rep.Revision {
		return
	}
	mine := map[drift.Ref]bool{}
	for _, r := range refs {
		mine[r] = true
	}
	ours := map[drift.Ref]bool{}
	for i := range rep.Objects {
		ours[drift.RefOfObject(&rep.Objects[i])] = true
	}
	only := map[drift.Ref]bool{}
	for _, o := range st.report.ArgoCDOnly {
		only[drift.RefOfObject(&drift.Object{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})] = true
	}
	for _, o := range st.report.Objects {
		k := drift.RefOfObject(&o)
		if !only[k] || ours[k] || !mine[k] {
			continue
		}
		rep.Objects = append(rep.Objects, o)
		rep.ArgoCDOnly = append(rep.ArgoCDOnly, drift.ArgoOnly{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Note: o.Note})
	}
	drift.SortObjects(rep.Objects)
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

// lastWrittenByApplier says whether the newest write to the live object of d (status writes
// aside) was the applier's.
func (a *Auditor) lastWrittenByApplier(c *live.Cache, d *unstructured.Unstructured, applier string) bool {
	l, ok := c.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName())
	if !ok {
		return false
	}
	var newest *metav1.ManagedFieldsEntry
	for i, e := range l.GetManagedFields() {
		if e.Subresource != "" || e.Time == nil {
			continue
		}
		if newest == nil || !e.Time.Before(newest.Time) {
			newest = &l.GetManagedFields()[i]
		}
	}
	return newest != nil && newest.Manager == applier
}
