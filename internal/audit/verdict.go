package audit

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/render"
)

// argoVerdicts puts Argo CD's own verdict beside each drifted object, explains where the two
// disagree, and lists objects Argo CD calls OutOfSync that the auditor does not.
func (a *Auditor) argoVerdicts(ctx context.Context, app *argocd.App, res *render.Result, rep *drift.Report) error {
	lives := make([]*unstructured.Unstructured, len(res.Objects))
	for i, d := range res.Objects {
		if l, ok := a.Live.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName()); ok {
			lives[i] = l
		}
	}
	verdicts, err := app.OutOfSync(ctx, res.Objects, lives)
	if err != nil {
		return err
	}
	argo := map[string]bool{}
	for i, d := range res.Objects {
		argo[key(d.GetKind(), d.GetNamespace(), d.GetName())] = verdicts[i]
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
		case !v.OutOfSync && onlyAdded(o):
			v.Note = "fields added by another manager are invisible to Argo CD's diff, which compares only the fields Git declares"
		case !v.OutOfSync:
			v.Note = "Argo CD's normalisation hides this difference"
		}
		o.ArgoCD = v
	}
	for i, d := range res.Objects {
		k := key(d.GetKind(), d.GetNamespace(), d.GetName())
		if verdicts[i] && !ours[k] {
			rep.ArgoCDOnly = append(rep.ArgoCDOnly, drift.ArgoOnly{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(),
				Note: "Argo CD reports OutOfSync; the auditor attributes the difference to an allowed owner (controller, ignoreDifferences) or to API defaults"})
		}
	}
	return nil
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
