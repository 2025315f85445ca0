package drift

import (
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync/hook"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FilteringLister is what a LiveReader may also offer: List of the objects keep accepts, judged
// on their metadata before anything else is read.
type FilteringLister interface {
	ListWhere(gvk schema.GroupVersionKind, namespace string, keep func(metav1.Object) bool) []*unstructured.Unstructured
}

// systemObjects are made in every namespace by Kubernetes itself.
var systemObjects = map[string]bool{"ConfigMap/kube-root-ca.crt": true, "ServiceAccount/default": true}

// DefaultExtraExcept are kinds never searched for Extra objects even when the env renders them:
// namespaces and CRDs are made by every install of every tool.
var DefaultExtraExcept = []schema.GroupKind{
	{Kind: "Namespace"}, {Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
}

// DefaultExtraIgnore are label selectors of cluster-scoped objects that are not Extra: an object
// that names the tool managing it (a Helm release's, an installer's) and Kubernetes' own
// bootstrap RBAC. In the env's namespaces they count for nothing: what is there and not in Git
// is the env's business whatever it says of itself. A label is a claim anyone can make; the
// README says so.
var DefaultExtraIgnore = []string{"app.kubernetes.io/managed-by", "kubernetes.io/bootstrapping"}

// extraKinds are the kinds searched for Extra objects: opts.ExtraKinds and, with
// opts.ExtraRendered, every kind the render declares, less opts.ExtraExcept.
func (idx *Index) extraKinds(opts *Options) []schema.GroupVersionKind {
	seen := map[schema.GroupKind]bool{}
	var out []schema.GroupVersionKind
	add := func(gvk schema.GroupVersionKind) {
		gk := gvk.GroupKind()
		if seen[gk] || slices.Contains(opts.ExtraExcept, gk) {
			return
		}
		seen[gk] = true
		out = append(out, gvk)
	}
	for _, gvk := range opts.ExtraKinds {
		add(gvk)
	}
	if opts.ExtraRendered {
		n := len(out)
		for _, gvk := range idx.kinds {
			add(gvk)
		}
		slices.SortFunc(out[n:], func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	}
	return out
}

// extras finds objects not in Git, without an owner and not made by an allowed controller, of
// the kinds in scope: in the namespaces the environment manages, and cluster-scoped ones.
func (idx *Index) extras(live LiveReader, opts Options) []Object {
	filtering, _ := live.(FilteringLister)
	var out []Object
	namespaces := make([]string, 0, len(idx.namespaces)+1)
	for ns := range idx.namespaces {
		namespaces = append(namespaces, ns)
	}
	namespaces = append(namespaces, "") // a namespaced kind lists nothing there, a cluster-scoped one everything
	for _, gvk := range idx.extraKinds(&opts) {
		for _, ns := range namespaces {
			if only, ok := opts.ExtraOnlyIn[ns]; ok && !slices.Contains(only, gvk.GroupKind()) {
				continue
			}
			list := func() []*unstructured.Unstructured { return live.List(gvk, ns) }
			if filtering != nil { // decode only what can be Extra: not declared, not owned
				list = func() []*unstructured.Unstructured {
					return filtering.ListWhere(gvk, ns, func(m metav1.Object) bool {
						r := Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: m.GetName()}
						return len(m.GetOwnerReferences()) == 0 && !idx.Has(r) && !opts.Hooks[r] && (opts.DeclaredElsewhere == nil || !opts.DeclaredElsewhere(r))
					})
				}
			}
			for _, l := range list() {
				if o := idx.extra(gvk, l, opts); o != nil {
					out = append(out, *o)
				}
			}
		}
	}
	return out
}

// extra returns l as an Extra object when it is one: in a managed namespace or cluster-scoped,
// not in Git, without an owner, not Kubernetes' own, not another Argo CD Application's, not
// ignored by label, and created by someone other than the allowed controllers. The applier's
// name excuses nothing: what it made and Git no longer declares is an object Argo CD would prune.
func (idx *Index) extra(gvk schema.GroupVersionKind, l *unstructured.Unstructured, opts Options) *Object {
	ns := l.GetNamespace()
	if ns != "" && !idx.namespaces[ns] || idx.Has(Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: l.GetName()}) ||
		len(l.GetOwnerReferences()) > 0 || systemObjects[gvk.Kind+"/"+l.GetName()] || kubernetesOwn(gvk, l) {
		return nil
	}
	if slices.Contains(opts.ExtraExcept, gvk.GroupKind()) || ns == "" && opts.extraIgnored(l) ||
		opts.ExtraOwn[Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: l.GetName()}] {
		return nil
	}
	if only, ok := opts.ExtraOnlyIn[ns]; ok && !slices.Contains(only, gvk.GroupKind()) {
		return nil
	}
	if r := (Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: l.GetName()}); opts.Hooks[r] || opts.DeclaredElsewhere != nil && opts.DeclaredElsewhere(r) {
		return nil // a hook Git declares, or another Application's of the env
	}
	if hook.IsHook(l) && opts.Application != "" && trackedBy(gvk, l) == opts.Application && madeByApplier(l, opts) {
		// A resource hook Argo CD ran for this Application and left in place (a delete policy
		// that keeps it, a hook since renamed): it neither compares nor prunes one. Made by
		// anyone else, the two annotations are a claim, and the object is Extra.
		return nil
	}
	note := ""
	if app := trackedBy(gvk, l); app != "" {
		if app != opts.Application || opts.Application == "" {
			return nil // another Application's object
		}
		note = "Argo CD's tracking annotation names this Application, but Git does not declare the object: Argo CD prunes it at a sync with prune on"
	}
	creator, borrowed := creatorOf(l, opts)
	if creator == nil {
		return nil
	}
	if borrowed != "" {
		note = strings.TrimPrefix(note+"; ", "; ") + borrowed
	}
	return &Object{APIVersion: l.GetAPIVersion(), Kind: l.GetKind(), Namespace: ns, Name: l.GetName(),
		Status: Extra, Fields: []Field{}, Creator: creator, Note: note}
}

// kubernetesOwn says whether the API server made l itself: the reserved system- priority classes
// (no one else may create them).
func kubernetesOwn(gvk schema.GroupVersionKind, l *unstructured.Unstructured) bool {
	return gvk.GroupKind() == schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"} && strings.HasPrefix(l.GetName(), "system-")
}

// trackedBy returns the Argo CD Application whose tracking annotation l carries, as Argo CD
// writes it: <app>:<group>/<kind>:<namespace>/<name>, naming l itself ("" when untracked, or
// when the annotation names another object: copied by hand).
func trackedBy(gvk schema.GroupVersionKind, l *unstructured.Unstructured) string {
	id := l.GetAnnotations()["argocd.argoproj.io/tracking-id"]
	app, rest, ok := strings.Cut(id, ":")
	if !ok || app == "" || rest != gvk.Group+"/"+gvk.Kind+":"+l.GetNamespace()+"/"+l.GetName() {
		return ""
	}
	return app
}

// extraIgnored says whether a label selector of opts.ExtraIgnore selects l.
func (opts *Options) extraIgnored(l *unstructured.Unstructured) bool {
	set := labels.Set(l.GetLabels())
	for _, s := range opts.ExtraIgnore {
		if sel, err := labels.Parse(s); err == nil && sel.Matches(set) {
			return true
		}
	}
	return false
}

// creatorOf returns the earliest writer of an object, or nil when every writer is an allowed
// controller (then the object is not hand-made). With audit events, a controller's name counts
// only when the write that created the object was made by that controller's identity; borrowed
// then says whose name a person used.
func creatorOf(l *unstructured.Unstructured, opts Options) (first *Writer, borrowed string) {
	var firstTime time.Time
	human := false
	for _, e := range l.GetManagedFields() {
		if !slices.Contains(opts.Creators, e.Manager) {
			human = true
		}
		var t time.Time
		if e.Time != nil {
			t = e.Time.UTC()
		}
		if first == nil || t.Before(firstTime) {
			first = &Writer{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource, Time: t.Format(time.RFC3339)}
			firstTime = t
		}
	}
	if first == nil {
		// No managedFields at all: cleared by a write (a controller's object always has its
		// entry). Nobody can be named from the object; the audit events may.
		return &Writer{}, "managedFields were cleared: the object's writers cannot be read from it"
	}
	if !human && opts.Events != nil {
		if id := opts.identityOf(first.Manager, nil); len(id) > 0 {
			if a := opts.Events.CreatorOf(l); a != nil && !id.Matches(a) {
				return first, borrowedNote(first.Manager, a)
			}
		}
	}
	if !human {
		return nil, ""
	}
	return first, ""
}

// madeByApplier says whether the GitOps sync (opts.Applier) created l and only it and the
// platform's controllers wrote it; with audit events, that the create was made by the applier's
// identity.
func madeByApplier(l *unstructured.Unstructured, opts Options) bool {
	applied := false
	for _, e := range l.GetManagedFields() {
		switch {
		case e.Manager == opts.Applier:
			applied = true
		case !slices.Contains(opts.Creators, e.Manager):
			return false
		}
	}
	if !applied {
		return false
	}
	if opts.Events != nil {
		if id := opts.identityOf(opts.Applier, nil); len(id) > 0 {
			if a := opts.Events.CreatorOf(l); a != nil && !id.Matches(a) {
				return false
			}
		}
	}
	return true
}
