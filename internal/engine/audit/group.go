package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
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

// unit is one Application of an env's group: what its audit read, rendered and found.
type unit struct {
	// key keys the unit's state, verdict memo and background render: the env for its own
	// Application (AppName), env/name for the others.
	key string
	// name and appNS name the Application; target is its render target (render.AppTarget, or
	// the env for overlays/<env>); parent the Application that declares it, as reports name it
	// (ref; "" for the root).
	name, appNS, target, parent string
	// role is what the Application is to its env: its own (alone, or in a group), the group's
	// root, or a member.
	role role
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

// role is what a unit is to its env.
type role uint8

const (
	// roleMember is an Application of the env's group that is neither its own nor its root.
	roleMember role = iota
	// roleAlone is the env's own Application when the env is that Application alone.
	roleAlone
	// roleOwn is the env's own Application in a group (a root's tree, or a selection).
	roleOwn
	// roleRoot is the root of the env's group (the app-of-apps).
	roleRoot
)

// own says whether u is the env's own Application (AppName), alone or in a group.
func (u *unit) own() bool { return u.role == roleAlone || u.role == roleOwn }

// inGroup says whether the env of u is a group of Applications rather than u alone.
func (u *unit) inGroup() bool { return u.role != roleAlone }

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
func (a *Auditor) prepareGroup(ctx context.Context, req Request, lap func(string)) ([]*unit, error) {
	main := &unit{key: req.Env, name: a.AppName(req.Env), appNS: a.AppNamespace, target: req.Env, role: roleAlone}
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
	top := &unit{key: a.unitKey(req.Env, root.Namespace, root.Name), name: root.Name, appNS: root.Namespace, app: root,
		target: render.AppTarget(root.Path), role: roleMember}
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
			return []*unit{top}, nil
		}
		if err := a.prepare(ctx, req, main, lap); err != nil {
			return nil, err
		}
		return []*unit{top, main}, nil
	}
	top.role = roleRoot
	return a.grow(ctx, req, []*unit{top}, root.RepoURL, lap)
}

// env is the env a unit's key belongs to.
func (u *unit) env() string { return unitEnv(u.key) }

// unitEnv is the env of a unit's key (env, or env/name).
func unitEnv(key string) string {
	env, _, _ := strings.Cut(key, "/")
	return env
}
