package drift

import (
	"bytes"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ControllerRule names a controller for some fields of some kinds: what that field manager
// writes there is its job, not drift. Rules come from the env's configuration; nothing else
// excuses a value that differs from Git.
type ControllerRule struct {
	// Manager is the field manager the controller writes as (kube-controller-manager, karpenter).
	Manager string `json:"manager"`
	// Subresource, when set, must match the managedFields entry's (scale for the HPA).
	Subresource string `json:"subresource,omitempty"`
	// Group and Kinds restrict the rule to kinds; empty Kinds means every kind of the group, and
	// an empty Group with empty Kinds every kind.
	Group string   `json:"group,omitempty"`
	Kinds []string `json:"kinds,omitempty"`
	// Paths are JSON pointers (RFC 6901) of the fields, each covering what lies below it.
	Paths []string `json:"paths"`
	// Autoscaled restricts the rule to objects a HorizontalPodAutoscaler in their namespace
	// targets (scaleTargetRef): a scale write under an autoscaler's name to an object no
	// autoscaler scales is drift.
	Autoscaled bool `json:"autoscaled,omitempty"`
}

// DefaultControllers are the platform's controllers and the fields they own: the HPA (run by
// kube-controller-manager, also behind KEDA) on replicas through the scale subresource, the
// Deployment controller's revision annotation, Karpenter's drift hashes on its node classes.
var DefaultControllers = []ControllerRule{
	{Manager: "kube-controller-manager", Subresource: "scale", Paths: []string{"/spec/replicas"}, Autoscaled: true},
	{Manager: "keda-operator", Subresource: "scale", Paths: []string{"/spec/replicas"}, Autoscaled: true},
	{Manager: "kube-controller-manager", Group: "apps", Kinds: []string{"Deployment"},
		Paths: []string{"/metadata/annotations/deployment.kubernetes.io~1revision"}},
	// The PV controller binds a claim Git declares to a volume, and the scheduler picks its node.
	{Manager: "kube-controller-manager", Kinds: []string{"PersistentVolumeClaim"}, Paths: []string{"/spec/volumeName",
		"/metadata/annotations/pv.kubernetes.io~1bind-completed", "/metadata/annotations/pv.kubernetes.io~1bound-by-controller",
		"/metadata/annotations/volume.kubernetes.io~1storage-provisioner", "/metadata/annotations/volume.beta.kubernetes.io~1storage-provisioner",
		"/metadata/finalizers"}},
	{Manager: "kube-scheduler", Kinds: []string{"PersistentVolumeClaim"}, Paths: []string{"/metadata/annotations/volume.kubernetes.io~1selected-node"}},
	{Manager: "karpenter", Group: "karpenter.sh", Kinds: []string{"NodePool"},
		Paths: []string{"/metadata/annotations/karpenter.sh~1nodepool-hash", "/metadata/annotations/karpenter.sh~1nodepool-hash-version"}},
	{Manager: "karpenter", Group: "karpenter.k8s.aws", Kinds: []string{"EC2NodeClass"},
		Paths: []string{"/metadata/annotations/karpenter.k8s.aws~1ec2nodeclass-hash", "/metadata/annotations/karpenter.k8s.aws~1ec2nodeclass-hash-version"}},
}

func (r ControllerRule) matches(gk schema.GroupKind, o *owner, p fieldpath.Path) bool {
	if o.Manager != r.Manager || r.Subresource != "" && o.Subresource != r.Subresource {
		return false
	}
	if r.Group != gk.Group && (r.Group != "" || len(r.Kinds) > 0) {
		return false
	}
	if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, gk.Kind) {
		return false
	}
	if len(r.Paths) == 0 {
		return true
	}
	for _, ptr := range r.Paths {
		if pointerCovers(ptr, p) {
			return true
		}
	}
	return false
}

// owner is one managedFields entry; its field set is decoded on first use (in-sync objects
// never need the applier's, the largest).
type owner struct {
	Manager, Operation, Subresource string
	Time                            time.Time
	raw                             []byte
	set                             *fieldpath.Set
}

func owners(entries []metav1.ManagedFieldsEntry) []*owner {
	out := make([]*owner, 0, len(entries))
	for _, e := range entries {
		o := &owner{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource}
		if e.Time != nil {
			o.Time = e.Time.UTC()
		}
		if e.FieldsV1 != nil {
			o.raw = e.FieldsV1.Raw
		}
		out = append(out, o)
	}
	return out
}

// fields returns the entry's field set (empty when it does not decode).
func (o *owner) fields() *fieldpath.Set {
	if o.set == nil {
		o.set = &fieldpath.Set{}
		if len(o.raw) > 0 && o.set.FromJSON(bytes.NewReader(o.raw)) != nil {
			o.set = &fieldpath.Set{}
		}
	}
	return o.set
}

// ownersAt returns the entries whose field set holds exactly p, never an ancestor's owner.
func ownersAt(os []*owner, p fieldpath.Path) []*owner {
	var out []*owner
	for _, o := range os {
		if o.fields().Has(p) {
			out = append(out, o)
		}
	}
	return out
}

// latest returns the most recent of the entries (nil for none).
func latest(os []*owner) *owner {
	var best *owner
	for _, o := range os {
		if best == nil || o.Time.After(best.Time) {
			best = o
		}
	}
	return best
}

func (o *owner) writer() Writer {
	w := Writer{Manager: o.Manager, Operation: o.Operation, Subresource: o.Subresource}
	if !o.Time.IsZero() {
		w.Time = o.Time.Format(time.RFC3339)
	}
	return w
}

// addedFields returns the live fields Git does not declare that a writer other than the applier
// (and other than a controller named for them) set: labels, annotations and spec-like fields,
// never status or bookkeeping.
func addedFields(gk schema.GroupKind, ns, name string, desired, live map[string]any, os []*owner, opts *Options, seen map[string]bool, defaulted func() map[string]any) []rawDiff {
	var out []rawDiff
	for _, o := range os {
		// The applier too: after a sync it owns only what Git declares (server-side apply drops
		// what it no longer sends), so a field it owns that Git lacks was written under its name.
		applier := o.Manager == opts.Applier
		o.fields().Leaves().Iterate(func(leaf fieldpath.Path) {
			if !countsForAdded(leaf) || applier && trackingField(leaf) {
				return
			}
			p, ok := firstUndeclared(desired, leaf, o, os)
			if !ok || seen[p.String()] || opts.controllerOwns(gk, ns, name, []*owner{o}, p) {
				return
			}
			v, ok := valueAt(live, p)
			if !ok || v == nil { // an explicit null is no value
				return
			}
			if defaulted != nil {
				if dv, ok := valueAt(defaulted(), p); ok && covered(dv, v, cursor{}) && covered(v, dv, cursor{}) {
					return // what the server's defaulting stores there
				}
			}
			seen[p.String()] = true
			out = append(out, rawDiff{path: p.Copy(), live: v, change: Added})
		})
	}
	return out
}

// controllerOwns reports whether one of the owners is a controller the options name for p of
// the object ns/name.
func (opts *Options) controllerOwns(gk schema.GroupKind, ns, name string, os []*owner, p fieldpath.Path) bool {
	for _, o := range os {
		for _, r := range opts.Controllers {
			if r.matches(gk, o, p) && (!r.Autoscaled || opts.Autoscaled != nil && opts.Autoscaled(gk, ns, name)) {
				return true
			}
		}
	}
	return false
}

// HPAGVK and ScaledObjectGVK are the kinds whose scaleTargetRef says what is autoscaled.
var (
	HPAGVK          = schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}
	ScaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
)

// AutoscaledIn returns what Options.Autoscaled asks, answered from the live
// HorizontalPodAutoscalers (KEDA's ScaledObjects make one too), read once per namespace.
func AutoscaledIn(live LiveReader) func(gk schema.GroupKind, namespace, name string) bool {
	targets := map[string]map[string]bool{}
	return func(gk schema.GroupKind, namespace, name string) bool {
		t, ok := targets[namespace]
		if !ok {
			t = map[string]bool{}
			for _, h := range live.List(HPAGVK, namespace) {
				ref, _, _ := unstructured.NestedStringMap(h.Object, "spec", "scaleTargetRef")
				gv, _ := schema.ParseGroupVersion(ref["apiVersion"])
				t[gv.Group+"/"+ref["kind"]+"/"+ref["name"]] = true
			}
			// A ScaledObject scales its target even while KEDA has paused it and removed the HPA.
			for _, so := range live.List(ScaledObjectGVK, namespace) {
				ref, _, _ := unstructured.NestedStringMap(so.Object, "spec", "scaleTargetRef")
				gv, _ := schema.ParseGroupVersion(ref["apiVersion"])
				kind := ref["kind"]
				if kind == "" { // KEDA's default target
					gv, kind = schema.GroupVersion{Group: "apps", Version: "v1"}, "Deployment"
				}
				t[gv.Group+"/"+kind+"/"+ref["name"]] = true
			}
			targets[namespace] = t
		}
		return t[gk.Group+"/"+gk.Kind+"/"+name]
	}
}

// trackingField is Argo CD's own bookkeeping, which it adds to what Git says when it syncs: the
// tracking annotation and, with label tracking, the instance label.
func trackingField(p fieldpath.Path) bool {
	if len(p) != 3 || p[0].FieldName == nil || *p[0].FieldName != "metadata" || p[1].FieldName == nil || p[2].FieldName == nil {
		return false
	}
	switch *p[1].FieldName + "/" + *p[2].FieldName {
	case "annotations/argocd.argoproj.io/tracking-id", "annotations/argocd.argoproj.io/installation-id",
		"labels/app.kubernetes.io/instance", "labels/argocd.argoproj.io/instance":
		return true
	}
	return false
}

// countsForAdded keeps spec-like fields, labels and annotations; not status or bookkeeping.
func countsForAdded(p fieldpath.Path) bool {
	if len(p) == 0 || p[0].FieldName == nil {
		return false
	}
	switch *p[0].FieldName {
	case "status", "apiVersion", "kind":
		return false
	case "metadata":
		if len(p) < 3 || p[1].FieldName == nil || p[2].FieldName == nil {
			return false
		}
		if f := *p[1].FieldName; f != "labels" && f != "annotations" {
			return false
		}
		return *p[2].FieldName != "kubectl.kubernetes.io/last-applied-configuration"
	}
	return true
}

// firstUndeclared returns the field a writer added that holds the leaf p: the shortest prefix of p
// that desired does not declare, that the writer owns as a whole (a list item it created, a map it
// made) and under which no other writer owns anything; else p itself. So an annotation the
// controller-manager set on an object whose Git manifest has no annotations is that annotation,
// not the whole map, which holds the applier's tracking annotation too.
func firstUndeclared(desired map[string]any, p fieldpath.Path, w *owner, all []*owner) (fieldpath.Path, bool) {
	for i := 1; i <= len(p); i++ {
		if _, ok := valueAt(desired, p[:i]); ok {
			continue
		}
		for j := i; j < len(p); j++ {
			if w.fields().Has(p[:j]) && !othersUnder(w, all, p[:j]) {
				return p[:j], true
			}
		}
		return p, true
	}
	return nil, false
}

// othersUnder reports whether an owner other than w owns p or anything below it.
func othersUnder(w *owner, all []*owner, p fieldpath.Path) bool {
	for _, o := range all {
		if o == w {
			continue
		}
		found := false
		o.fields().Iterate(func(q fieldpath.Path) {
			if !found && len(q) >= len(p) && q[:len(p)].Equals(p) {
				found = true
			}
		})
		if found {
			return true
		}
	}
	return false
}

// removedBy names who removed p, from the versions of the object the watch saw (newest first):
// the managedFields entry the API server stamped in the update that took p away.
func removedBy(versions []*unstructured.Unstructured, p fieldpath.Path) *Writer {
	for i := 0; i+1 < len(versions); i++ {
		newer, older := versions[i], versions[i+1]
		if _, ok := valueAt(newer.Object, p); ok {
			continue
		}
		if _, ok := valueAt(older.Object, p); !ok {
			continue
		}
		if w := changedEntry(older.GetManagedFields(), newer.GetManagedFields()); w != nil {
			return w
		}
		return nil
	}
	return nil
}

// changedEntry returns the entry of the update's writer: the API server stamps a new time on
// the entry of the manager that wrote (an entry whose set only shrank lost fields to someone
// else and did not write). Among several, the latest.
func changedEntry(before, after []metav1.ManagedFieldsEntry) *Writer {
	var best *metav1.ManagedFieldsEntry
	for i := range after {
		e := &after[i]
		if e.Time == nil {
			continue
		}
		stamped := true
		for _, b := range before {
			if b.Manager == e.Manager && b.Operation == e.Operation && b.Subresource == e.Subresource {
				stamped = b.Time == nil || !b.Time.Equal(e.Time)
				break
			}
		}
		if stamped && (best == nil || e.Time.After(best.Time.Time)) {
			best = e
		}
	}
	if best == nil {
		return nil
	}
	return &Writer{Manager: best.Manager, Operation: string(best.Operation), Subresource: best.Subresource,
		Time: best.Time.UTC().Format(time.RFC3339)}
}

// OwnerOf returns the newest writer that owns exactly p on the live object (from managedFields),
// or nil when nobody does: who set the value the field has now.
func OwnerOf(live *unstructured.Unstructured, p FieldPath) *Writer {
	o := latest(ownersAt(owners(live.GetManagedFields()), p.Path()))
	if o == nil {
		return nil
	}
	w := o.writer()
	return &w
}

// CreatorOf returns the earliest writer of the live object: who made it.
func CreatorOf(live *unstructured.Unstructured) *Writer {
	var first *owner
	for _, o := range owners(live.GetManagedFields()) {
		if first == nil || o.Time.Before(first.Time) {
			first = o
		}
	}
	if first == nil {
		return nil
	}
	w := first.writer()
	return &w
}
