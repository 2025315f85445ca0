package drift

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FilteringLister is what a LiveReader may also offer: List of the objects keep accepts, judged
// on their metadata before anything else is read.
type FilteringLister interface {
	ListWhere(gvk schema.GroupVersionKind, namespace string, keep func(metav1.Object) bool) []*unstructured.Unstructured
}

// systemObjects are made in every namespace by Kubernetes itself.
var systemObjects = map[string]bool{"ConfigMap/kube-root-ca.crt": true, "ServiceAccount/default": true}

// extras finds objects of hand-written kinds in the namespaces the environment manages that are
// not in Git, have no owner, and were not made by an allowed controller.
func (idx *Index) extras(live LiveReader, opts Options) []Object {
	filtering, _ := live.(FilteringLister)
	var out []Object
	for _, gvk := range opts.ExtraKinds {
		for ns := range idx.namespaces {
			list := func() []*unstructured.Unstructured { return live.List(gvk, ns) }
			if filtering != nil { // decode only what can be Extra: not declared, not owned
				list = func() []*unstructured.Unstructured {
					return filtering.ListWhere(gvk, ns, func(m metav1.Object) bool {
						return len(m.GetOwnerReferences()) == 0 && !idx.Has(Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: m.GetName()})
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

// extra returns l as an Extra object when it is one: in a managed namespace, not in Git, without
// an owner, not made by Kubernetes itself, and created by someone other than the applier and the
// allowed controllers.
func (idx *Index) extra(gvk schema.GroupVersionKind, l *unstructured.Unstructured, opts Options) *Object {
	ns := l.GetNamespace()
	if !idx.namespaces[ns] || idx.Has(Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: l.GetName()}) ||
		len(l.GetOwnerReferences()) > 0 || systemObjects[gvk.Kind+"/"+l.GetName()] {
		return nil
	}
	creator := creatorOf(l, opts)
	if creator == nil {
		return nil
	}
	return &Object{APIVersion: l.GetAPIVersion(), Kind: l.GetKind(), Namespace: ns, Name: l.GetName(),
		Status: Extra, Fields: []Field{}, Creator: creator}
}

// creatorOf returns the earliest writer of an object, or nil when every writer is an allowed
// controller or the applier (then the object is not hand-made).
func creatorOf(l *unstructured.Unstructured, opts Options) *Writer {
	var first *Writer
	var firstTime time.Time
	human := false
	for _, e := range l.GetManagedFields() {
		if e.Manager != opts.Applier && !slices.Contains(opts.Creators, e.Manager) {
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
	if !human {
		return nil
	}
	return first
}
