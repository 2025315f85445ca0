// Package argocd reads what the auditor needs from Argo CD's Application — the synced revision,
// the source, the destination, ignoreDifferences — and runs Argo CD's own diff and normalizers.
// It is the one place that knows Argo CD's types.
package argocd

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argoutil "github.com/argoproj/argo-cd/v3/util/argo"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ApplicationGVK is Argo CD's Application kind.
var ApplicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// App is the part of an Application the audit uses.
type App struct {
	Name, Namespace string
	RepoURL         string
	TargetRevision  string
	Path            string
	// DestinationNamespace is where namespaced objects without a namespace go.
	DestinationNamespace string
	// DestinationServer and DestinationName name the cluster it syncs to.
	DestinationServer, DestinationName string
	// SyncedRevision is the commit the cluster was last synced to: the newest entry of
	// status.history (Argo CD records each successful sync there), else the last operation's
	// result when it succeeded, else status.sync.revision (the revision last compared with, which
	// runs ahead of the synced one while a new commit waits for a sync). For a multi-source
	// Application, the entry of the source audited.
	SyncedRevision string
	// Status is Argo CD's own comparison as its controller recorded it; nil until it has
	// reconciled the Application once.
	Status *Status
	// Operation is the sync operation Argo CD runs or last ran; nil when none is recorded.
	Operation *Operation
	// KustomizePatches are the source's spec.source.kustomize.patches (of the synced source when
	// Argo CD recorded one): Argo CD appends them to the overlay's patches before it builds, and
	// so must a render of what it applied (render.Source.WithPatches).
	KustomizePatches []map[string]any
	// KustomizeUnsupported names the source's kustomize options the auditor does not apply
	// (version, kubeVersion, apiVersions): a render without them is not what Argo CD applied.
	KustomizeUnsupported []string
	// Unrenderable says why the auditor cannot render the source the way Argo CD does ("" when
	// it can): a Helm chart in spec.sources, a plugin.
	Unrenderable string
	// Project is the AppProject the Application belongs to.
	Project string
	// ControlPlaneNamespace is the namespace of Argo CD's control plane ("": argocd): an
	// Application elsewhere is named <namespace>_<name> in its build environment (InstanceName).
	ControlPlaneNamespace string
	// Chart is the chart of a Helm chart repository the source names (spec.source.chart; RepoURL
	// is the chart repository, TargetRevision its version or constraint); "" for a Git source.
	Chart string
	// Sources are a multi-source Application's sources (nil for one source), each with its own
	// synced revision; the fields above are those of the one audited first (the env's overlay,
	// else the first with a path).
	Sources    []Source
	helm       *v1alpha1.ApplicationSourceHelm
	kustomize  *v1alpha1.ApplicationSourceKustomize
	directory  *v1alpha1.ApplicationSourceDirectory
	source     v1alpha1.ApplicationSource // the audited source, as synced
	rawIgnores []v1alpha1.ResourceIgnoreDifferences
}

// Source is one source of a multi-source Application.
type Source struct {
	RepoURL, Path, TargetRevision string
	// Ref names the source for the others' value files ($ref/...).
	Ref string
	// SyncedRevision is the commit of this source last synced ("" before a sync).
	SyncedRevision string
	// KustomizePatches and KustomizeUnsupported are as the App's, for this source.
	KustomizePatches     []map[string]any
	KustomizeUnsupported []string
	helm                 *v1alpha1.ApplicationSourceHelm
	kustomize            *v1alpha1.ApplicationSourceKustomize
	directory            *v1alpha1.ApplicationSourceDirectory
	raw                  v1alpha1.ApplicationSource
}

// WithGitSpec returns the Application as Git declares it (git: its manifest in the render that
// declares it) with the cluster's record of it (a: status, synced revision, operation): the path,
// kustomize patches and ignoreDifferences come from Git. A live ignoreDifferences that Git does not
// declare then excuses nothing; the difference is drift of the Application object itself.
func (a *App) WithGitSpec(git *App) *App {
	if a == nil {
		return git
	}
	out := *a
	out.Path, out.TargetRevision, out.DestinationNamespace = git.Path, git.TargetRevision, git.DestinationNamespace
	out.DestinationServer, out.DestinationName, out.RepoURL, out.Chart = git.DestinationServer, git.DestinationName, git.RepoURL, git.Chart
	out.KustomizePatches, out.KustomizeUnsupported, out.Unrenderable = git.KustomizePatches, git.KustomizeUnsupported, git.Unrenderable
	out.Project, out.helm, out.kustomize, out.source, out.rawIgnores = git.Project, git.helm, git.kustomize, git.source, git.rawIgnores
	out.directory = git.directory
	out.Sources = nil
	for i, s := range git.Sources {
		s.SyncedRevision = ""
		if i < len(a.Sources) {
			s.SyncedRevision = a.Sources[i].SyncedRevision
		}
		out.Sources = append(out.Sources, s)
	}
	return &out
}

// WithControlPlane returns the App with ControlPlaneNamespace ns (nil for a nil App).
func (a *App) WithControlPlane(ns string) *App {
	if a == nil {
		return nil
	}
	out := *a
	out.ControlPlaneNamespace = ns
	return &out
}

// InstanceName is the Application's name as Argo CD's controller sends it to its repo-server
// (Application.InstanceName, $ARGOCD_APP_NAME): its name in the control plane's namespace (or
// none), else <namespace>_<name>.
func (a *App) InstanceName() string {
	cp := a.ControlPlaneNamespace
	if cp == "" {
		cp = "argocd"
	}
	app := v1alpha1.Application{}
	app.Name, app.Namespace = a.Name, a.Namespace
	return app.InstanceName(cp)
}

// SyncedRevisions are the revisions a was last synced to: SyncedRevision, then each source's
// (nil for a nil App).
func (a *App) SyncedRevisions() []string {
	if a == nil {
		return nil
	}
	out := []string{a.SyncedRevision}
	for _, s := range a.Sources {
		out = append(out, s.SyncedRevision)
	}
	return out
}

// SyncedAs says whether a and b were synced to the same revision of every source.
func (a *App) SyncedAs(b *App) bool { return slices.Equal(a.SyncedRevisions(), b.SyncedRevisions()) }

// ComparedAs says whether Argo CD's comparison in a is b's: at the same revision, with the same
// error (its verdict on each resource may still differ).
func (a *App) ComparedAs(b *App) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Status == nil || b.Status == nil {
		return a.Status == b.Status
	}
	return a.Status.Revision == b.Status.Revision && a.Status.Error == b.Status.Error
}

// RendersAs says whether a renders as git does: every field WithGitSpec takes from Git is a's
// already. Nil and empty lists are alike: Argo CD's history drops the empty lists a manifest
// may write (valueFiles: []).
func (a *App) RendersAs(git *App) bool {
	if a == nil || git == nil {
		return a == git
	}
	same := equality.Semantic.DeepEqual
	if a.Path != git.Path || a.TargetRevision != git.TargetRevision || a.DestinationNamespace != git.DestinationNamespace ||
		a.DestinationServer != git.DestinationServer || a.DestinationName != git.DestinationName || a.RepoURL != git.RepoURL ||
		a.Chart != git.Chart || a.Unrenderable != git.Unrenderable || a.Project != git.Project || len(a.Sources) != len(git.Sources) ||
		!same(a.KustomizePatches, git.KustomizePatches) || !same(a.KustomizeUnsupported, git.KustomizeUnsupported) ||
		!same(a.helm, git.helm) || !same(a.kustomize, git.kustomize) || !same(a.directory, git.directory) || !same(a.source, git.source) ||
		!same(a.rawIgnores, git.rawIgnores) {
		return false
	}
	for i, s := range a.Sources {
		g := git.Sources[i]
		if s.RepoURL != g.RepoURL || s.Path != g.Path || s.TargetRevision != g.TargetRevision || s.Ref != g.Ref ||
			!same(s.KustomizePatches, g.KustomizePatches) || !same(s.KustomizeUnsupported, g.KustomizeUnsupported) ||
			!same(s.helm, g.helm) || !same(s.kustomize, g.kustomize) || !same(s.directory, g.directory) || !same(s.raw, g.raw) {
			return false
		}
	}
	return true
}

// Operation is the state of a sync operation (status.operationState).
type Operation struct {
	// Phase is Running, Terminating, Failed, Error or Succeeded.
	Phase string
	// Revision is the revision it syncs (of the source audited); Message Argo CD's words.
	Revision, Message string
}

// InProgress says whether a sync operation to a revision other than the synced one is under
// way: objects Argo CD has applied already are at that revision, the rest at the synced one.
func (a *App) InProgress() bool {
	return a.Operation != nil && (a.Operation.Phase == "Running" || a.Operation.Phase == "Terminating") &&
		a.Operation.Revision != "" && a.Operation.Revision != a.SyncedRevision
}

// Failed says whether the last sync operation failed at a revision other than the synced one:
// objects it applied before failing are at that revision.
func (a *App) Failed() bool {
	return a.Operation != nil && (a.Operation.Phase == "Failed" || a.Operation.Phase == "Error") &&
		a.Operation.Revision != "" && a.Operation.Revision != a.SyncedRevision
}

// Status is the comparison Argo CD's application controller last recorded in the Application:
// every resource it tracks and whether it is OutOfSync with Revision.
type Status struct {
	// Revision is the commit the resources were compared with; ReconciledAt when.
	Revision, ReconciledAt string
	// Resources maps ResourceKey of each tracked resource to "Synced", "OutOfSync" or "Unknown"
	// (Argo CD could not compare it).
	Resources map[string]string
	// Error is set when Argo CD could not compare at all (a ComparisonError or InvalidSpecError
	// condition, or sync status Unknown): then it has no verdict on any resource.
	Error string
	// comparedTo is the source Argo CD compared (status.sync.comparedTo.source).
	comparedTo v1alpha1.ApplicationSource
}

// ComparedItsSource says whether Argo CD's comparison (Status) is of the source the App renders:
// the one synced, or Git's spec after WithGitSpec. A spec changed since, by hand or in Git and not
// synced, makes it false.
func (a *App) ComparedItsSource() bool {
	return a != nil && a.Status != nil && equality.Semantic.DeepEqual(a.Status.comparedTo, a.source)
}

// ResourceKey names a resource as Argo CD's status lists it: group/kind/namespace/name.
func ResourceKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

// FromUnstructured reads an Application object. A multi-source Application (spec.sources) is
// read through the source whose path is under overlays/ (the env's overlay), else the first one.
func FromUnstructured(u *unstructured.Unstructured) (*App, error) {
	if u.GroupVersionKind().GroupKind() != ApplicationGVK.GroupKind() {
		return nil, fmt.Errorf("%s %s is not an Argo CD Application", u.GetKind(), u.GetName())
	}
	var app v1alpha1.Application
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &app); err != nil {
		return nil, fmt.Errorf("application %s: %w", u.GetName(), err)
	}
	normalizeSources(&app)
	a := &App{Name: app.Name, Namespace: app.Namespace, DestinationNamespace: app.Spec.Destination.Namespace,
		DestinationServer: app.Spec.Destination.Server, DestinationName: app.Spec.Destination.Name,
		Project: app.Spec.Project, rawIgnores: app.Spec.IgnoreDifferences}
	compared, synced := app.Status.Sync.Revision, syncedRevisions(&app)
	src := 0
	switch {
	case len(app.Spec.Sources) > 0:
		src = primarySource(app.Spec.Sources)
		s := app.Spec.Sources[src]
		a.RepoURL, a.TargetRevision, a.Path = s.RepoURL, s.TargetRevision, s.Path
		compared = ""
		if src < len(app.Status.Sync.Revisions) {
			compared = app.Status.Sync.Revisions[src]
		}
	case app.Spec.Source != nil:
		a.RepoURL, a.TargetRevision, a.Path = app.Spec.Source.RepoURL, app.Spec.Source.TargetRevision, app.Spec.Source.Path
		a.Chart = app.Spec.Source.Chart
	}
	kustomize := sourceKustomize(&app, src)
	a.helm, a.directory = sourceHelm(&app, src), sourceDirectory(&app, src)
	a.Unrenderable = unrenderable(&app)
	a.SyncedRevision = compared // an Application written before any sync operation (or by hand)
	if src < len(synced) && synced[src] != "" {
		a.SyncedRevision = synced[src]
		// What was synced is the history entry's source (argocd app rollback syncs an old entry;
		// a spec edited since has not been synced yet).
		if h := app.Status.History; len(h) > 0 {
			last := h[len(h)-1]
			switch {
			case len(app.Spec.Sources) > 0 && src < len(last.Sources):
				a.RepoURL, a.Path = last.Sources[src].RepoURL, last.Sources[src].Path
				kustomize, a.helm, a.directory = last.Sources[src].Kustomize, last.Sources[src].Helm, last.Sources[src].Directory
			case len(app.Spec.Sources) == 0 && last.Source.RepoURL != "":
				a.RepoURL, a.Path, a.Chart = last.Source.RepoURL, last.Source.Path, last.Source.Chart
				kustomize, a.helm, a.directory = last.Source.Kustomize, last.Source.Helm, last.Source.Directory
			}
		}
	}
	var err error
	a.kustomize = kustomize
	switch {
	case len(app.Spec.Sources) > src:
		a.source = *app.Spec.Sources[src].DeepCopy()
	case app.Spec.Source != nil:
		a.source = *app.Spec.Source.DeepCopy()
	}
	a.source.RepoURL, a.source.Path, a.source.Kustomize, a.source.Helm = a.RepoURL, a.Path, kustomize, a.helm
	a.source.Directory = a.directory
	if a.KustomizePatches, a.KustomizeUnsupported, err = kustomizeOptions(kustomize); err != nil {
		return nil, fmt.Errorf("application %s: %w", app.Name, err)
	}
	if a.Sources, err = sources(&app, synced); err != nil {
		return nil, fmt.Errorf("application %s: %w", app.Name, err)
	}
	if op := app.Status.OperationState; op != nil {
		a.Operation = operationOf(op, src)
	}
	if app.Status.ReconciledAt != nil && app.Status.Resources != nil {
		a.Status = statusOf(&app, compared)
	}
	return a, nil
}

// normalizeSources normalizes the Application's sources as Argo CD's controller does on every
// refresh, before it renders them again or syncs them (argo.NormalizeSource, from
// normalizeApplication; its API server does the same on every write): a kustomize, helm or
// directory block with no option set is dropped, so that the source's type is found from what its
// path holds (kustomize, Helm, else a directory), and a directory block setting only include or
// exclude keeps just those. An Application declared in Git with directory: {} on a kustomization
// is rendered by kustomize, as Argo CD renders it. The history's sources were synced from a spec
// normalized so; normalizing them again changes nothing Argo CD rendered.
func normalizeSources(app *v1alpha1.Application) {
	for i := range app.Spec.Sources {
		argoutil.NormalizeSource(&app.Spec.Sources[i])
	}
	if app.Spec.Source != nil {
		argoutil.NormalizeSource(app.Spec.Source)
	}
	for i := range app.Status.History {
		h := &app.Status.History[i]
		argoutil.NormalizeSource(&h.Source)
		for j := range h.Sources {
			argoutil.NormalizeSource(&h.Sources[j])
		}
	}
}

// SameRepo says whether two repository URLs name the same repository, as Argo CD compares them:
// without a trailing slash or .git, the host in lower case.
func SameRepo(a, b string) bool { return normalRepo(a) == normalRepo(b) }

func normalRepo(u string) string {
	u = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(u), "/"), ".git")
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		host, p, _ := strings.Cut(rest, "/")
		return strings.ToLower(scheme) + "://" + strings.ToLower(host) + "/" + p
	}
	return u
}
