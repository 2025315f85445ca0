package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/argoproj/argo-cd/v3/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// Besides the tree its root declares, an env's group takes Applications Git does not declare one
// by one: those an ApplicationSet of the tree generated (followed from the ApplicationSet, as
// Argo CD's controller owns them by it), and those the env's selection picks from the cluster (its
// namespaces, AppProjects and label selector). Git holds no manifest of such an Application, so it
// is audited by its live spec (source, path, revision): its objects are compared with that
// source's render, and the Application object itself is not compared. Its ApplicationSet is.

// AppSelection picks the Applications of an env's group from the cluster.
type AppSelection struct {
	// Namespaces are searched for Applications (empty: the Auditor's AppNamespace).
	Namespaces []string
	// Projects keeps only Applications of these AppProjects (empty: any).
	Projects []string
	// Selector keeps only Applications whose labels match (nil: every one).
	Selector labels.Selector
}

// ApplicationSetGVK is Argo CD's ApplicationSet.
var ApplicationSetGVK = argocd.ApplicationGVK.GroupVersion().WithKind("ApplicationSet")

// selection returns env's selection, nil when it has none.
func (a *Auditor) selection(env string) *AppSelection {
	if a.Select == nil {
		return nil
	}
	return a.Select(env)
}

// selected lists the Applications sel picks, by namespace then name.
func (a *Auditor) selected(ctx context.Context, sel *AppSelection) ([]*argocd.App, error) {
	namespaces := sel.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{a.AppNamespace}
	}
	selector := ""
	if sel.Selector != nil && !sel.Selector.Empty() {
		selector = sel.Selector.String()
	}
	var out []*argocd.App
	for _, ns := range namespaces {
		items, err := a.Live.ListDirect(ctx, argocd.ApplicationGVK, ns, selector)
		if err != nil {
			return nil, fmt.Errorf("the env's selection: %w", err)
		}
		apps, err := fromList(items, func(u *unstructured.Unstructured) bool {
			project, _, _ := unstructured.NestedString(u.Object, "spec", "project")
			// One an Application synced (its tracking id) is Git's: declared by that one, or
			// left behind by it (Extra), never a member by the selection's say.
			_, tracked := u.GetAnnotations()[common.AnnotationKeyAppInstance]
			return !tracked && (len(sel.Projects) == 0 || slices.Contains(sel.Projects, project))
		})
		if err != nil {
			return nil, err
		}
		out = append(out, apps...)
	}
	return out, nil
}

// generated lists the Applications ApplicationSet r controls, by name; listed keeps the
// namespaces' Applications already listed in this audit.
func (a *Auditor) generated(ctx context.Context, r drift.Ref, listed map[string][]*unstructured.Unstructured) ([]*argocd.App, error) {
	items, ok := listed[r.Namespace] // one list of a namespace serves every ApplicationSet in it
	if !ok {
		var err error
		if items, err = a.Live.ListDirect(ctx, argocd.ApplicationGVK, r.Namespace, ""); err != nil {
			return nil, fmt.Errorf("ApplicationSet %s: %w", r.Name, err)
		}
		listed[r.Namespace] = items
	}
	return fromList(items, func(u *unstructured.Unstructured) bool {
		return slices.ContainsFunc(u.GetOwnerReferences(), func(o metav1.OwnerReference) bool {
			return o.Kind == ApplicationSetGVK.Kind && o.Name == r.Name && strings.HasPrefix(o.APIVersion, ApplicationSetGVK.Group+"/") &&
				o.Controller != nil && *o.Controller // a copy of a generated one may keep the reference, not as its controller
		})
	})
}

// fromList decodes the Applications keep keeps, sorted by name.
func fromList(items []*unstructured.Unstructured, keep func(*unstructured.Unstructured) bool) ([]*argocd.App, error) {
	var out []*argocd.App
	for _, u := range items {
		if !keep(u) {
			continue
		}
		app, err := argocd.FromUnstructured(u)
		if err != nil {
			return nil, fmt.Errorf("Application %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, app)
	}
	slices.SortFunc(out, func(x, y *argocd.App) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// discovered prepares Application app, which the cluster holds but no render of the group
// declares, by its live spec. via says how it was found; repoURL is the repository the auditor
// reads (an Application of another one needs Argo CD's repo-server). What keeps it from being
// audited is its err; only a cancelled audit or a background render is returned.
func (a *Auditor) discovered(ctx context.Context, req Request, app *argocd.App, parent, via, repoURL string, lap func(string)) (*unit, error) {
	u := &unit{key: a.unitKey(req.Env, app.Namespace, app.Name), name: app.Name, appNS: app.Namespace, parent: parent, role: roleMember,
		via: via, app: app, target: render.AppTarget(app.Path)}
	if repoURL == "" {
		repoURL = a.RepoURL
	}
	if repoURL == "" && a.RepoServer == nil && app.Chart == "" {
		u.err = &unitError{msg: fmt.Sprintf("Application %s: the auditor cannot tell whether %s is the repository it reads (give it the repository's URL)", u.name, app.RepoURL)}
		return u, nil
	}
	u.foreign = app.Chart == "" && !argocd.SameRepo(app.RepoURL, repoURL)
	if u.foreign && a.RepoServer == nil && app.Unrenderable == "" {
		u.err = &unitError{msg: fmt.Sprintf("Application %s: its source is another repository (%s); the auditor reads %s", u.name, app.RepoURL, repoURL)}
		return u, nil
	}
	err := a.prepare(ctx, req, u, lap)
	var rendering *RenderingError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &rendering):
		return nil, err
	default:
		u.err = err
	}
	return u, nil
}

// otherEnvs says whether ns/name is another env's root or own Application: never taken into
// this env's group by a selection.
func (a *Auditor) otherEnvs(env, ns, name string) bool {
	if ns != a.AppNamespace {
		return false
	}
	for _, e := range a.envs() {
		if e != env && (name == a.RootName(e) || name == a.AppName(e)) {
			return true
		}
	}
	return false
}

// withoutRoot prepares an env the cluster has no root Application of: its own Application over
// overlays/<env>, and the Applications its selection picks. With a selection, the env's own
// Application is left out when the cluster has none (the env is the selection's Applications).
func (a *Auditor) withoutRoot(ctx context.Context, req Request, main *unit, lap func(string)) ([]*unit, error) {
	if main.name == "" && a.selection(req.Env) == nil {
		// The env is its root's tree alone (a repository of another layout): nothing to audit.
		root := a.RootName(req.Env)
		if root == "" {
			return nil, fmt.Errorf("%s: the env names no root Application and no selection of Applications", req.Env)
		}
		return nil, fmt.Errorf("%s: the cluster has no root Application %s/%s (is it the name Argo CD shows, in that namespace?)", req.Env, a.AppNamespace, root)
	}
	if a.selection(req.Env) == nil {
		if err := a.prepare(ctx, req, main, lap); err != nil {
			return nil, err
		}
		return []*unit{main}, nil
	}
	var app *argocd.App
	if main.name != "" {
		var err error
		if app, err = a.application(ctx, main.appNS, main.name); err != nil {
			return nil, err
		}
	}
	var units []*unit
	repoURL := ""
	if app != nil {
		main.app, repoURL = app, app.RepoURL
		if err := a.prepare(ctx, req, main, lap); err != nil {
			return nil, err
		}
		units = append(units, main)
	}
	units, err := a.grow(ctx, req, units, repoURL, lap)
	if err != nil {
		return nil, err
	}
	if len(units) == 0 {
		return nil, fmt.Errorf("%s: no Application %s/%s and none selected", req.Env, main.ns(a), main.name)
	}
	return units, nil
}
