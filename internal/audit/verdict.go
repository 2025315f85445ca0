package audit

import (
	"context"
	"strings"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
)

// argoVerdicts puts Argo CD's own verdict beside each drifted object and explains where the two
// disagree. An object Argo CD calls OutOfSync that the auditor's comparison passed is drift too:
// it joins the report's objects (fields from Argo CD's own two sides) and is also listed in
// argocdOnly, so the disagreement stays visible.
func (a *Auditor) argoVerdicts(ctx context.Context, app *argocd.App, desired []*unstructured.Unstructured, overrides map[string]v1alpha1.ResourceOverride, opts *drift.Options, rep *drift.Report) error {
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
	argo := map[string]bool{}
	for i, d := range desired {
		argo[key(d.GetKind(), d.GetNamespace(), d.GetName())] = verdicts[i].OutOfSync
	}
	ours := map[string]bool{}
	for i := range rep.Objects {
		o := &rep.Objects[i]
		k := key(o.Kind, o.Namespace, o.Name)
		ours[k] = true
		v := &drift.ArgoVerdict{OutOfSync: argo[k]}
		switch {
		case o.Status == drift.Extra:
			v.Note = "not in Git and not tracked by the Application: Argo CD does not list it"
		case o.Status == drift.Unknown:
			v.Note = "Argo CD cannot compare a kind the cluster does not serve either"
		case !v.OutOfSync && onlyAdded(o):
			v.Note = "fields added by another manager are invisible to Argo CD's diff, which compares only the fields Git declares"
		case !v.OutOfSync:
			v.Note = "Argo CD's diff (without a server-side dry run) does not flag this difference"
		}
		o.ArgoCD = v
	}
	for i, d := range desired {
		k := key(d.GetKind(), d.GetNamespace(), d.GetName())
		if !verdicts[i].OutOfSync || ours[k] {
			continue
		}
		const note = "Argo CD's diff reports OutOfSync where the auditor's comparison found no difference"
		o := drift.Object{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(),
			Status: drift.Modified, Fields: []drift.Field{}, Note: note, ArgoCD: &drift.ArgoVerdict{OutOfSync: true, Note: note}}
		if p, l := verdicts[i].Predicted, verdicts[i].Live; p != nil && l != nil {
			pu := &unstructured.Unstructured{Object: p}
			plain := *opts
			plain.Normalizer = nil  // Argo CD's sides are normalised already
			plain.Controllers = nil // show every field Argo CD's sides differ in, a controller's too
			if m := drift.CompareObject(pu, &unstructured.Unstructured{Object: l}, nil, &plain); m != nil {
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
