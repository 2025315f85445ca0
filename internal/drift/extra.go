package drift

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// systemObjects are made in every namespace by Kubernetes itself.
var systemObjects = map[string]bool{"ConfigMap/kube-root-ca.crt": true, "ServiceAccount/default": true}

// extras finds objects of hand-written kinds in the namespaces the environment manages that are
// not in Git, have no owner, and were not made by an allowed controller.
func extras(desired []*unstructured.Unstructured, live LiveReader, opts Options) []Object {
	inGit := map[string]bool{}
	namespaces := map[string]bool{}
	for _, d := range desired {
		gk := d.GroupVersionKind().GroupKind()
		inGit[gk.String()+"/"+d.GetNamespace()+"/"+d.GetName()] = true
		if d.GetNamespace() != "" {
			namespaces[d.GetNamespace()] = true
		}
		if gk == (schema.GroupKind{Kind: "Namespace"}) {
			namespaces[d.GetName()] = true
		}
	}
	var out []Object
	for _, gvk := range opts.ExtraKinds {
		for ns := range namespaces {
			for _, l := range live.List(gvk, ns) {
				if inGit[gvk.GroupKind().String()+"/"+ns+"/"+l.GetName()] || len(l.GetOwnerReferences()) > 0 ||
					systemObjects[gvk.Kind+"/"+l.GetName()] {
					continue
				}
				creator := creatorOf(l, opts)
				if creator == nil {
					continue
				}
				out = append(out, Object{APIVersion: l.GetAPIVersion(), Kind: l.GetKind(), Namespace: ns, Name: l.GetName(),
					Status: Extra, Fields: []Field{}, Creator: creator})
			}
		}
	}
	return out
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
