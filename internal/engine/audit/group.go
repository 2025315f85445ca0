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

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// An env is audited as a group of Argo CD Applications: its root Application (an app-of-apps,
// RootName(env), when the cluster has one) and every Application the root's render declares,
// followed down (an Application that declares Applications is a root of its own). Each is
// rendered from its own source path as Git declares it and compared with the live objects; the
// Applications and AppProjects are objects of the Application that declares them. Without a
// root, the env is its one Application, AppName(env), rendering overlays/<env>.

// argoKinds are the kinds an app-of-apps declares in Argo CD's namespace: the only kinds searched
// there for Extra objects (the rest is Argo CD's install).
var argoKinds = []schema.GroupKind{
	{Group: "argoproj.io", Kind: "Application"}, {Group: "argoproj.io", Kind: "AppProject"},
	{Group: "argoproj.io", Kind: "ApplicationSet"},
}

// prepared is one Application of an env's group: what its audit read, rendered and found.
type prepared struct {
	// key keys the unit's state, verdict memo and background render: the env for its own
	// Application (AppName), env/name for the others.
	key string
	// name and appNS name the Application; target is its render target (render.AppTarget, or
	// the env for overlays/<env>); parent the Application that declares it, as reports name it
	// (ref; "" for the root).
	name, appNS, target, parent string
	// main marks the env's own Application; group says the env has more than it (a root, or a
	// selection); root marks the root.
	main, group, root bool
	// renderedAs says how its path was rendered when not as a plain kustomization or directory:
	// as a Helm chart, or with the Application's kustomize options.
	renderedAs string
	// selfFile is where Git keeps the root's own manifest (self).
	selfFile string
	// via says how an Application Git does not declare was found: "ApplicationSet <name>" (it
	// generated it) or "selection" (the env's AppSelection picked it); "" for a declared one.
	via string
	// live says the cluster had the Application when it was audited.
	live bool
	// self is the root's own manifest in Git (clusters/<env>/root.yaml), audited as an object of
	// the root: it is bootstrapped by hand, and no Application declares it.
	self *unstructured.Unstructured
	// app is the Application audited (the cluster's record with Git's spec); git its manifest in
	// the parent's render (nil for the root, and without a root).
	app, git *argocd.App

	desired, head string
	pending       bool
	idx           *drift.Index
	kinds         []schema.GroupVersionKind
	unknown       []drift.Object
	hooks         map[drift.Ref]bool
	overrides     map[string]v1alpha1.ResourceOverride
	opts          drift.Options // with the schema and the normaliser of that audit
	report        *drift.Report
	// err says why the Application could not be audited; the group's others are.
	err error
	// elsewhere says another replica audits it (Config.Owns): it is left out of the report.
	elsewhere bool
	// cluster is the live cache of the Application's destination when it is not Argo CD's own
	// cluster (Config.Clusters), and clusterName the name reports give that cluster.
	cluster     *live.Cache
	clusterName string
	// renderedBy says which engine rendered it (RenderedByRepoServer or RenderedInProcess).
	renderedBy string
	// merged are its drifted objects as merge listed them.
	merged []drift.Object
	// rendered is the unit's render as the auditor made it, hooks included (RenderGroup only).
	rendered *render.Result
	// foreign says its source is another Git repository than the auditor's (rendered only by
	// Argo CD's repo-server, at the revision Argo CD synced).
	foreign bool
	// ignores are the ignoreApplicationDifferences of the ApplicationSets in its render, for
	// the Applications they generate (objects of this unit too); notes say what the report must
	// tell of those whose Applications could not be generated.
	ignores []v1alpha1.ResourceIgnoreDifferences
	notes   []string
	// generated are the Applications in its render that an ApplicationSet of it generates (by
	// the set's name): members of the group through their ApplicationSet (audited by their live
	// spec), not by this render's say. createOnly names the sets that never update them.
	generated  map[drift.Ref]string
	createOnly map[string]bool
}

// unitError is a reason an Application cannot be audited that is not a failure of the audit.
type unitError struct {
	msg   string
	cause error // what it wraps, when it says one
}

func (e *unitError) Error() string { return e.msg }

// Unwrap is the error the reason wraps, if any (reposerver.ErrUnreachable, say).
func (e *unitError) Unwrap() error { return e.cause }

// unitKey keys an Application of env's group: env/name in Argo CD's namespace, env/ns/name in
// another (two Applications of one name in two namespaces are two units).
func (a *Auditor) unitKey(env, ns, name string) string {
	if ns == "" || ns == a.AppNamespace {
		return env + "/" + name
	}
	return env + "/" + ns + "/" + name
}

// RootName is the root Application (app-of-apps) of env by default: root-<env>.
func RootName(env string) string { return "root-" + env }

// prepareGroup finds and prepares the Applications of req.Env's group.
func (a *Auditor) prepareGroup(ctx context.Context, req Request, lap func(string)) ([]*prepared, error) {
	main := &prepared{key: req.Env, name: a.AppName(req.Env), appNS: a.AppNamespace, target: req.Env, main: true}
	var root *argocd.App
	if name := a.RootName(req.Env); name != "" {
		var err error
		if root, err = a.application(ctx, a.AppNamespace, name); err != nil {
			return nil, err
		}
	}
	if root == nil {
		return a.withoutRoot(ctx, req, main, lap)
	}
	top := &prepared{key: a.unitKey(req.Env, root.Namespace, root.Name), name: root.Name, appNS: root.Namespace, app: root,
		target: render.AppTarget(root.Path), group: true}
	var err error
	if top.git, top.self, err = a.gitRoot(req.Env, root); err != nil {
		return nil, err
	}
	if top.self != nil {
		top.selfFile = a.RootManifest(req.Env)
	}
	if top.git != nil {
		top.target = render.AppTarget(top.git.Path)
	}
	if err := a.prepare(ctx, req, top, lap); err != nil {
		var rendering *RenderingError
		if errors.As(err, &rendering) || !isUnitError(err) {
			return nil, fmt.Errorf("root Application %s/%s: %w", root.Namespace, root.Name, err)
		}
		// A root the auditor cannot render (a Helm chart of Applications): the env's own
		// Application alone, the root listed as not audited.
		top.err = err
		if main.name == "" { // an env of its root's tree alone: nothing else to audit
			return []*prepared{top}, nil
		}
		if err := a.prepare(ctx, req, main, lap); err != nil {
			return nil, err
		}
		return []*prepared{top, main}, nil
	}
	top.root = true
	return a.grow(ctx, req, []*prepared{top}, root.RepoURL, lap)
}

// grow adds to units (prepared already) the Applications they declare, followed down; those the
// ApplicationSets among them generated; then those the env's selection picks, followed down too.
// repoURL is the repository the auditor reads.
func (a *Auditor) grow(ctx context.Context, req Request, units []*prepared, repoURL string, lap func(string)) ([]*prepared, error) {
	seen := map[string]bool{}
	for _, u := range units {
		seen[u.ns(a)+"/"+u.name] = true
	}
	// full says the group has as many Applications as it audits, with pending ones found: the
	// next one is not rendered.
	full := func(pending int, ns, name string) bool {
		return len(units)+pending >= a.MaxApplications && (ns != a.AppNamespace || name != a.AppName(req.Env))
	}
	beyond := func(ns, name, parent, via string) *prepared {
		return &prepared{key: a.unitKey(req.Env, ns, name), name: name, appNS: ns, parent: parent, via: via, group: true,
			err: &unitError{msg: fmt.Sprintf("Application %s: not audited: the group has more than %d Applications, the most one audit renders", name, a.MaxApplications)}}
	}
	listed := map[string][]*unstructured.Unstructured{}
	follow := func(queue []*prepared) error {
		for ; len(queue) > 0; queue = queue[1:] {
			parent := queue[0]
			if parent.err != nil || parent.idx == nil {
				continue
			}
			for _, r := range parent.idx.Refs() {
				if r.Group != argocd.ApplicationGVK.Group {
					continue
				}
				var found []*prepared
				switch r.Kind {
				case argocd.ApplicationGVK.Kind:
					if _, gen := parent.generated[r]; gen || seen[r.Namespace+"/"+r.Name] {
						continue
					}
					seen[r.Namespace+"/"+r.Name] = true
					if full(len(found), r.Namespace, r.Name) {
						found = append(found, beyond(r.Namespace, r.Name, parent.ref(a), ""))
						continue
					}
					u, err := a.member(ctx, req, parent, repoURL, r, lap)
					if err != nil {
						return err
					}
					found = append(found, u)
				case ApplicationSetGVK.Kind:
					apps, err := a.generated(ctx, r, listed)
					if err != nil {
						return err
					}
					for _, app := range apps {
						if seen[app.Namespace+"/"+app.Name] {
							continue
						}
						seen[app.Namespace+"/"+app.Name] = true
						if full(len(found), app.Namespace, app.Name) {
							found = append(found, beyond(app.Namespace, app.Name, parent.ref(a), "ApplicationSet "+r.Name))
							continue
						}
						u, err := a.discovered(ctx, req, app, parent.ref(a), "ApplicationSet "+r.Name, repoURL, lap)
						if err != nil {
							return err
						}
						found = append(found, u)
					}
				}
				for _, u := range found {
					units = append(units, u)
					queue = append(queue, u)
				}
			}
		}
		return nil
	}
	if err := follow(slices.Clone(units)); err != nil {
		return nil, err
	}
	sel := a.selection(req.Env)
	if sel == nil {
		return units, nil
	}
	apps, err := a.selected(ctx, sel)
	if err != nil {
		return nil, err
	}
	var picked []*prepared
	for _, app := range apps {
		if seen[app.Namespace+"/"+app.Name] || a.otherEnvs(req.Env, app.Namespace, app.Name) {
			continue
		}
		seen[app.Namespace+"/"+app.Name] = true
		if full(0, app.Namespace, app.Name) {
			units = append(units, beyond(app.Namespace, app.Name, "", "selection"))
			continue
		}
		u, err := a.discovered(ctx, req, app, "", "selection", repoURL, lap)
		if err != nil {
			return nil, err
		}
		units = append(units, u)
		picked = append(picked, u)
	}
	if err := follow(picked); err != nil {
		return nil, err
	}
	if len(units) > 1 {
		for _, u := range units {
			u.group = true // the env's own Application too: its namespaces are shared
		}
	}
	return units, nil
}

// member prepares Application r that parent declares. What keeps it from being audited is its
// err; only what stops the env's audit (the env's own Application failing, a background render)
// is returned.
func (a *Auditor) member(ctx context.Context, req Request, parent *prepared, repoURL string, r drift.Ref, lap func(string)) (*prepared, error) {
	u := &prepared{key: a.unitKey(req.Env, r.Namespace, r.Name), name: r.Name, appNS: r.Namespace, parent: parent.ref(a), group: true}
	d, ok := parent.idx.Desired(r)
	if !ok {
		return nil, fmt.Errorf("Application %s is not in %s's render", r.Name, parent.name)
	}
	if u.git, u.err = argocd.FromUnstructured(d); u.err != nil {
		if r.Name == a.AppName(req.Env) && r.Namespace == a.AppNamespace {
			return nil, u.err // the env's own Application: its error is the env's
		}
		return u, nil
	}
	u.target = render.AppTarget(u.git.Path)
	if r.Name == a.AppName(req.Env) && r.Namespace == a.AppNamespace {
		u.key, u.main = req.Env, true
		if path.Clean(u.git.Path) == render.OverlayPath(req.Env) {
			u.target = req.Env
		}
	}
	u.foreign = u.git.Chart == "" && !argocd.SameRepo(u.git.RepoURL, repoURL)
	if u.foreign && a.RepoServer == nil && u.git.Unrenderable == "" {
		u.err = &unitError{msg: fmt.Sprintf("Application %s: its source is another repository (%s); the auditor reads %s", u.name, u.git.RepoURL, repoURL)}
		return u, nil
	}
	if u.app, u.err = a.application(ctx, r.Namespace, r.Name); u.err != nil {
		if u.main || ctx.Err() != nil {
			return nil, u.err
		}
		return u, nil
	}
	err := a.prepare(ctx, req, u, lap)
	var rendering *RenderingError
	switch {
	case err == nil:
	case ctx.Err() != nil: // cancelled: no verdict on this Application, nor on the env
		return nil, ctx.Err()
	case errors.As(err, &rendering), u.main && !isUnitError(err):
		return nil, err
	default:
		u.err = err
	}
	return u, nil
}

func isUnitError(err error) bool {
	var ue *unitError
	return errors.As(err, &ue)
}

// env is the env a unit's key belongs to.
func (u *prepared) env() string { return unitEnv(u.key) }

// unitEnv is the env of a unit's key (env, or env/name).
func unitEnv(key string) string {
	env, _, _ := strings.Cut(key, "/")
	return env
}

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
func (u *prepared) on(a *Auditor) *live.Cache {
	if u.cluster != nil {
		return u.cluster
	}
	return a.Live
}

// destination resolves the cluster app syncs to: Argo CD's own (in-cluster) is Live, another is
// Config.Clusters', whose error makes the Application not audited.
func (a *Auditor) destination(ctx context.Context, u *prepared, app *argocd.App) error {
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
