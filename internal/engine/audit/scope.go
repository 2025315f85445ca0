package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync/hook"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// revisions picks the desired revision (forced, else the one Argo CD synced, else what Git says
// the env runs: its pin in apps/<env>/release.yaml, or the branch head) and says whether the
// target is a pending sync: ahead of the synced revision, which it descends from. A branch that
// was reset behind the synced revision is not pending.
func (a *Auditor) revisions(app *argocd.App, req Request) (desired, head string, pending bool, err error) {
	branch := "HEAD"
	if app != nil && app.TargetRevision != "" && app.TargetRevision != "HEAD" {
		branch = app.TargetRevision
	}
	if head, err = a.Repo.Resolve(branch); err != nil {
		return "", "", false, err
	}
	if app == nil && req.Revision == "" {
		// No Argo CD to ask: Git's release file says which commit the env runs.
		if head, err = release.RevisionAt(a.Repo, req.Env, head); err != nil {
			return "", "", false, err
		}
	}
	desired = head
	switch {
	case req.Revision != "":
		desired, err = a.Repo.Resolve(req.Revision)
		return desired, head, false, err
	case app != nil && app.SyncedRevision != "":
		if desired, err = a.Repo.Resolve(app.SyncedRevision); err != nil {
			return "", "", false, fmt.Errorf("Application %s/%s is synced to %s, which the repository does not have (fetch it?): %w", app.Namespace, app.Name, app.SyncedRevision, err)
		}
	}
	if head == desired {
		return desired, head, false, nil
	}
	pending, err = a.Repo.IsAncestor(desired, head)
	return desired, head, pending, err
}

// scope indexes the rendered objects of kinds the cluster serves — namespaced ones given the
// Application's destination namespace when Git leaves it out, cluster-scoped ones stripped of a
// namespace the API server would ignore — and returns their kinds, and Unknown objects of kinds
// it lacks. A render given as JSON (res.Raw) is decoded one object at a time, and an object
// scope leaves as it is is indexed as the JSON it came as.
func (a *Auditor) scope(c *live.Cache, res *render.Result, destNS string) (idx *drift.Index, kinds []schema.GroupVersionKind, unknown []drift.Object, hooks map[drift.Ref]bool, err error) {
	n := len(res.Objects)
	if res.Objects == nil {
		n = len(res.Raw)
	}
	b := drift.NewIndexBuilder(n)
	seen := map[schema.GroupVersionKind]bool{}
	for i := range n {
		var o *unstructured.Unstructured
		var raw json.RawMessage
		if res.Objects != nil {
			o = res.Objects[i]
		} else {
			raw, o = res.Raw[i], &unstructured.Unstructured{}
			if err := o.UnmarshalJSON(raw); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("%s: object %d of the render: %w", res.Env, i+1, err)
			}
		}
		if hook.IsHook(o) || hook.Skip(o) {
			// Argo CD runs a hook around a sync (and never applies a Skip one): neither is in
			// its comparison, nor in the audit.
			if hooks == nil {
				hooks = map[drift.Ref]bool{}
			}
			ns := o.GetNamespace()
			if ns == "" {
				ns = destNS // a cluster-scoped hook found live is excused by its annotation
			}
			hooks[drift.Ref{Group: o.GroupVersionKind().Group, Kind: o.GetKind(), Namespace: ns, Name: o.GetName()}] = true
			continue
		}
		if o.GetName() == "" {
			name, note := o.GetGenerateName()+"*", "only a generateName: Argo CD creates a new object at each sync, so none is compared"
			if o.GetGenerateName() == "" {
				// A directory source's document may have no name: Argo CD keeps it, and fails to apply it.
				name, note = "", "no name: Argo CD renders it and cannot apply it, so none is compared"
			}
			unknown = append(unknown, drift.Object{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(),
				Name: name, Status: drift.Unknown, Fields: []drift.Field{}, Note: note})
			continue
		}
		m, err := c.Mapping(o.GroupVersionKind())
		if err != nil {
			unknown = append(unknown, drift.Object{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(),
				Name: o.GetName(), Status: drift.Unknown, Fields: []drift.Field{}, Note: err.Error()})
			continue
		}
		namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
		if namespaced == (o.GetNamespace() == "") {
			// A namespace to give (the destination's) or to strip. The object is the render's
			// own when it came decoded: a copy is changed.
			if raw == nil {
				o = o.DeepCopy()
			}
			raw = nil // the JSON no longer says what the object is
			if namespaced {
				o.SetNamespace(destNS)
			} else {
				o.SetNamespace("")
			}
		}
		if ns := o.GetNamespace(); namespaced && !c.Covers(o.GroupVersionKind(), ns) {
			note := fmt.Sprintf("namespace %s is not among the namespaces the auditor watches (watchNamespaces): add it, and the auditor's read access there", ns)
			if o.GroupVersionKind().GroupKind() == argocd.ApplicationGVK.GroupKind() {
				note = fmt.Sprintf("the auditor watches Applications in %s alone (appNamespace): an Application in %s is not compared", a.AppNamespace, ns)
			}
			unknown = append(unknown, drift.Object{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: ns,
				Name: o.GetName(), Status: drift.Unknown, Fields: []drift.Field{}, Note: note})
			continue
		}
		if gvk := o.GroupVersionKind(); !seen[gvk] {
			seen[gvk] = true
			kinds = append(kinds, gvk)
		}
		b.Add(o, raw)
	}
	return b.Index(), kinds, unknown, hooks, nil
}

// schemaFor types kinds from the cluster's OpenAPI v3, reusing the last schema while the
// documents behind it are unchanged.
func (a *Auditor) schemaFor(ctx context.Context, c *live.Cache, kinds []schema.GroupVersionKind) (*drift.Schema, error) {
	seen := map[schema.GroupVersion]bool{}
	var gvs []schema.GroupVersion
	for _, gvk := range kinds {
		if gv := gvk.GroupVersion(); !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
	}
	models, key, err := c.OpenAPIModels(ctx, gvs)
	if err != nil {
		return nil, err
	}
	a.cache.schemaMu.Lock()
	defer a.cache.schemaMu.Unlock()
	if a.cache.schema != nil && a.cache.schemaKey == key {
		return a.cache.schema, nil
	}
	s, err := drift.NewSchema(models)
	if err != nil {
		return nil, err
	}
	a.cache.schema, a.cache.schemaKey = s, key
	return s, nil
}

// application reads an Application; nil when Argo CD (or the Application) is absent.
func (a *Auditor) application(ctx context.Context, namespace, name string) (*argocd.App, error) {
	if namespace == "" {
		namespace = a.AppNamespace
	}
	u, err := a.Live.GetDirect(ctx, argocd.ApplicationGVK, namespace, name)
	var kerr *live.KindError
	if apierrors.IsNotFound(err) || errors.As(err, &kerr) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return argocd.FromUnstructured(u)
}

// overrides reads argocd-cm's ignoreDifferences customizations; none when the ConfigMap is
// absent or the auditor may not read it.
func (a *Auditor) overrides(ctx context.Context) (map[string]v1alpha1.ResourceOverride, error) {
	u, err := a.Live.GetDirect(ctx, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, a.AppNamespace, argocd.ConfigMapName)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	return argocd.Overrides(data)
}
