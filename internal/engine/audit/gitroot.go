package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// disables says what a hand edit of an Application turns off, from the fields of its drift: the
// note a reviewer reads first. Empty when the edit disables nothing known.
func disables(o *drift.Object) string {
	if o.Status != drift.Modified || o.Kind != argocd.ApplicationGVK.Kind || !strings.HasPrefix(o.APIVersion, argocd.ApplicationGVK.Group+"/") {
		return ""
	}
	var notes []string
	for _, f := range o.Fields {
		switch {
		case f.Path == ".spec.syncPolicy.automated.selfHeal" && f.Live != true:
			notes = append(notes, "selfHeal turned off on "+o.Name+": later hand edits to its objects will stand")
		case f.Path == ".spec.syncPolicy.automated.prune" && f.Live != true:
			notes = append(notes, "prune turned off on "+o.Name+": objects removed from Git stay in the cluster")
		case f.Path == ".spec.syncPolicy.automated.enabled" && f.Live == false,
			(f.Path == ".spec.syncPolicy.automated" || f.Path == ".spec.syncPolicy") && f.Live == nil:
			notes = append(notes, "automated sync turned off on "+o.Name+": Git's commits are no longer applied")
		case f.Path == ".metadata.annotations.argocd.argoproj.io/skip-reconcile" && f.Live == "true":
			notes = append(notes, "reconciliation skipped on "+o.Name+": Argo CD no longer compares or syncs it")
		case within(f.Path, ".metadata.finalizers") && f.Desired != nil:
			notes = append(notes, "a finalizer removed from "+o.Name+": deleting it no longer deletes (or waits for) what it synced")
		case within(f.Path, ".spec.ignoreDifferences"):
			notes = append(notes, "ignoreDifferences on "+o.Name+" that Git does not declare: Argo CD no longer sees what it names; the auditor excuses nothing by it")
		case within(f.Path, ".spec.source") || within(f.Path, ".spec.sources"):
			notes = append(notes, o.Name+" syncs a source Git does not declare")
		case within(f.Path, ".spec.destination"):
			notes = append(notes, o.Name+" syncs to a destination Git does not declare")
		case within(f.Path, ".spec.project"):
			notes = append(notes, o.Name+" moved to a project Git does not declare")
		}
	}
	return strings.Join(slices.Compact(notes), "; ")
}

// within says whether path is p or inside it.
func within(path, p string) bool {
	return path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")
}

// RootManifest is where Git keeps an env's root Application by default: clusters/<env>/root.yaml,
// applied by hand once per cluster.
func RootManifest(env string) string { return path.Join("clusters", env, "root.yaml") }

// gitRoot reads the root Application's manifest from Git (at the branch the root follows): the
// root is then audited by its Git spec (path, patches, ignoreDifferences), its live spec an
// object compared with it. Nil when Git has no manifest of that Application.
func (a *Auditor) gitRoot(env string, root *argocd.App) (*argocd.App, *unstructured.Unstructured, error) {
	file := a.RootManifest(env)
	if file == "" {
		return nil, nil, nil
	}
	rev := "HEAD"
	if root.TargetRevision != "" && root.TargetRevision != "HEAD" {
		if _, err := a.Repo.Resolve(root.TargetRevision); err == nil {
			rev = root.TargetRevision
		}
	}
	data, err := a.Repo.ReadFile(rev, file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	// The root's own document, among the file's others (projects, other envs' roots).
	obj, err := layout.RootApplication(data, root.Name)
	if errors.Is(err, layout.ErrNoApplication) {
		return nil, nil, nil // another Application's, or none
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GroupVersionKind().Group != argocd.ApplicationGVK.Group {
		return nil, nil, nil
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(root.Namespace)
	}
	git, err := argocd.FromUnstructured(u)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	return git, u, nil
}

// withObjects returns res with more objects (a copy: a render from the cache is shared), in
// one append.
func withObjects(res *render.Result, objs ...*unstructured.Unstructured) (*render.Result, error) {
	out := *res
	if res.Objects == nil {
		raws := make([]json.RawMessage, 0, len(objs))
		for _, u := range objs {
			raw, err := u.MarshalJSON()
			if err != nil {
				return nil, err
			}
			raws = append(raws, raw)
		}
		out.Raw = append(slices.Clip(res.Raw), raws...)
		return &out, nil
	}
	out.Objects = append(slices.Clip(res.Objects), objs...)
	return &out, nil
}

// on is the live cache of the unit's destination cluster.
func (u *unit) on(a *Auditor) *live.Cache {
	if u.cluster != nil {
		return u.cluster
	}
	return a.Live
}

// destination resolves the cluster app syncs to: Argo CD's own (in-cluster) is Live, another is
// Config.Clusters', whose error makes the Application not audited.
func (a *Auditor) destination(ctx context.Context, u *unit, app *argocd.App) error {
	u.cluster, u.clusterName, u.elsewhere = nil, "", false
	if app == nil || argocd.InCluster(app.DestinationServer, app.DestinationName) {
		u.elsewhere = a.Owns != nil && !a.Owns(InCluster)
		return nil
	}
	dest := app.DestinationServer
	if dest == "" {
		dest = app.DestinationName
	}
	u.clusterName = dest // until Clusters names it
	if a.Owns != nil {
		if a.ClusterName != nil {
			if name, ok := a.ClusterName(app.DestinationServer, app.DestinationName); ok {
				u.clusterName = name
			}
		}
		if !a.Owns(u.clusterName) {
			u.elsewhere = true
			return nil
		}
	}
	if a.Clusters == nil {
		return &unitError{msg: fmt.Sprintf("Application %s: its destination %s is not the cluster the auditor reads, and no other cluster is configured", u.name, dest)}
	}
	c, name, err := a.Clusters(ctx, app.DestinationServer, app.DestinationName)
	if err != nil {
		return &unitError{msg: fmt.Sprintf("Application %s: %v", u.name, err)}
	}
	u.cluster, u.clusterName = c, name
	return nil
}
