package drift

import (
	"bytes"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// managedFieldsPath is where the API server records who owns each field.
var managedFieldsPath = fieldpath.MakePathOrDie("metadata", "managedFields")

// What a write did to managedFields (the live value of the field that reports it).
const (
	OwnersCleared   = "cleared: the API server's record of who owns each field is gone"
	OwnersRewritten = "rewritten: a write replaced the API server's record of who owns each field"
)

// ownershipLost returns the difference that reports a write that cleared or rewrote l's
// managedFields: none left at all, or a version the watch saw (versions, newest first) in which
// an entry gained fields or appeared without being the write's own. Who made it comes from the
// watch when it saw the write. ok is false when managedFields look as the API server keeps them.
func ownershipLost(l *unstructured.Unstructured, versions []*unstructured.Unstructured, desired map[string]any, os []*owner, applier string) (rawDiff, *Writer, bool) {
	for i := 0; i+1 < len(versions); i++ {
		newer, older := versions[i].GetManagedFields(), versions[i+1].GetManagedFields()
		switch {
		case len(newer) == 0 && len(older) > 0:
			return rawDiff{path: managedFieldsPath, live: OwnersCleared, change: Changed}, changedEntry(older, newer), true
		case len(older) > 0 && (rewritten(older, newer) || lostOwners(versions[i+1], versions[i])):
			return rawDiff{path: managedFieldsPath, live: OwnersRewritten, change: Changed}, changedEntry(older, newer), true
		}
	}
	// The API server makes a before-first-apply entry only when an apply meets an object with no
	// managedFields: it owns whatever was there, whoever wrote it.
	if ownedBy(os, beforeFirstApply) {
		return rawDiff{path: managedFieldsPath, live: OwnersCleared, change: Changed}, nil, true
	}
	// Cleared (and maybe written since by a controller, whose status write gives it an entry):
	// the applier has no entry, and a field Git declares is in the object with nobody owning it.
	// A stored object (one with a resourceVersion) keeps an owner for each field a write set
	// since Kubernetes 1.18; an object Git declares nothing ownable of (a Namespace by name) has
	// no entry at all, and that is no sign.
	if l.GetResourceVersion() != "" && !ownedBy(os, applier) && unownedDeclared(desired, l.Object, os) {
		return rawDiff{path: managedFieldsPath, live: OwnersCleared, change: Changed}, nil, true
	}
	return rawDiff{}, nil, false
}

// unownedDeclared says whether a field desired declares (a map key, or a list as a whole) is in
// live with no owner at it, above it or below it. After a sync every such field is the
// applier's, or the writer's that took it over.
func unownedDeclared(desired, live map[string]any, os []*owner) bool {
	var walk func(p fieldpath.Path, d any) bool
	walk = func(p fieldpath.Path, d any) bool {
		if m, ok := d.(map[string]any); ok && len(m) > 0 {
			for k, v := range m {
				if len(p) == 0 && (k == "apiVersion" || k == "kind" || k == "status") ||
					len(p) == 1 && *p[0].FieldName == "metadata" && k != "labels" && k != "annotations" {
					continue
				}
				if walk(append(p[:len(p):len(p)], fieldpath.PathElement{FieldName: &k}), v) {
					return true
				}
			}
			return false
		}
		if _, ok := valueAt(live, p); !ok || len(p) == 0 {
			return false
		}
		for _, o := range os {
			if hasUnder(o.fields(), p) {
				return false
			}
			for i := 1; i < len(p); i++ {
				if o.fields().Has(p[:i]) {
					return false
				}
			}
		}
		return true
	}
	return walk(nil, desired)
}

// beforeFirstApply is the entry the API server gives what an object held when a server-side
// apply met it without managedFields.
const beforeFirstApply = "before-first-apply"

// writers leaves out the before-first-apply entry: it names no writer.
func writers(os []*owner) []*owner {
	out := make([]*owner, 0, len(os))
	for _, o := range os {
		if o.Manager != beforeFirstApply {
			out = append(out, o)
		}
	}
	return out
}

// rewritten says whether the update from before to after set managedFields itself. An update
// stamps its writer's entry with the time and gives it what it wrote; every other entry can only
// lose fields. So more than one entry gaining fields (or appearing), or one gaining beside
// another stamped, is a write that sent its own managedFields. The API server's own merged
// entries (ancient-changes, before-first-apply) are left out.
func rewritten(before, after []metav1.ManagedFieldsEntry) bool {
	type key struct{ manager, op, sub string }
	old := map[key]metav1.ManagedFieldsEntry{}
	var newest time.Time
	for _, b := range before {
		old[key{b.Manager, string(b.Operation), b.Subresource}] = b
		if b.Time != nil && b.Time.After(newest) {
			newest = b.Time.Time
		}
	}
	unexplained, stamped := 0, 0
	for _, e := range after {
		if e.Manager == "ancient-changes" || e.Manager == beforeFirstApply {
			continue
		}
		b, ok := old[key{e.Manager, string(e.Operation), e.Subresource}]
		if !ok && e.Time != nil && e.Time.Time.Before(newest) {
			return true // a new entry dated before writes already made
		}
		isStamped := !ok || (b.Time == nil) != (e.Time == nil) || b.Time != nil && e.Time != nil && !b.Time.Equal(e.Time)
		if isStamped {
			stamped++
		} else if gainedFields(b, e) {
			unexplained++
		}
	}
	// An entry that gained fields without a new time is the writer's only when no other entry
	// was stamped (two writes by one manager within a second keep its time).
	return unexplained > 1 || unexplained == 1 && stamped > 0
}

// lostOwners says whether a field some entry of older owned is still in newer with no entry
// owning it: an update hands a field to its writer or removes it, never leaves it unowned.
func lostOwners(older, newer *unstructured.Unstructured) bool {
	now := owners(newer.GetManagedFields())
	for _, o := range owners(older.GetManagedFields()) {
		lost := false
		o.fields().Leaves().Iterate(func(p fieldpath.Path) {
			if lost {
				return
			}
			if _, ok := valueAt(newer.Object, p); ok && len(ownersAt(now, p)) == 0 {
				lost = true
			}
		})
		if lost {
			return true
		}
	}
	return false
}

// gainedFields says whether after's field set holds a path before's does not.
func gainedFields(before, after metav1.ManagedFieldsEntry) bool {
	if after.FieldsV1 == nil {
		return false
	}
	if before.FieldsV1 != nil && bytes.Equal(before.FieldsV1.Raw, after.FieldsV1.Raw) {
		return false
	}
	b, a := &fieldpath.Set{}, &fieldpath.Set{}
	if before.FieldsV1 != nil && b.FromJSON(bytes.NewReader(before.FieldsV1.Raw)) != nil {
		return false
	}
	if a.FromJSON(bytes.NewReader(after.FieldsV1.Raw)) != nil {
		return false
	}
	return !a.Difference(b).Empty()
}

// unownedAdditions returns the live fields nobody owns that Git, as the server defaults it, does
// not hold: once managedFields are gone, what a writer added beside Git's fields. Controller
// rules are matched on the path alone (no owner is left to match), and Argo CD's tracking
// fields are its own.
func unownedAdditions(gvk schema.GroupVersionKind, base, live map[string]any, os []*owner, pt *typed.ParseableType, opts *Options, seen map[string]bool) []rawDiff {
	if pt == nil {
		pt = &typed.DeducedParseableType
	}
	live, _ = pruneNulls(live).(map[string]any)
	bt, lt, err := typedPair(base, live, pt)
	if err != nil {
		if bt, lt, err = typedPair(base, live, &typed.DeducedParseableType); err != nil {
			return nil
		}
	}
	cmp, err := bt.Compare(lt)
	if err != nil {
		return nil
	}
	var out []rawDiff
	for _, p := range minimal(cmp.Added) {
		if !countsForAdded(p) || trackingField(p) || seen[p.String()] || hasUnderAny(os, p) || ruleCovers(opts, gvk.GroupKind(), p) {
			continue
		}
		v, ok := valueAt(live, p)
		if !ok || isEmpty(v) {
			continue
		}
		seen[p.String()] = true
		out = append(out, rawDiff{path: p, live: v, change: Added})
	}
	return out
}

// hasUnderAny says whether an owner owns p or something below it.
func hasUnderAny(os []*owner, p fieldpath.Path) bool { return len(ownersUnder(os, p)) > 0 }

// ruleCovers says whether a controller rule of the options names p of the kind, whatever the
// manager.
func ruleCovers(opts *Options, gk schema.GroupKind, p fieldpath.Path) bool {
	for _, r := range opts.Controllers {
		if r.Group != gk.Group && (r.Group != "" || len(r.Kinds) > 0) {
			continue
		}
		if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, gk.Kind) {
			continue
		}
		for _, ptr := range r.Paths {
			if pointerCovers(ptr, p) {
				return true
			}
		}
	}
	return false
}

// replicasPath is the field the scale subresource writes.
var replicasPath = fieldpath.MakePathOrDie("spec", "replicas")

// scaledKinds are the built-in kinds with a scale subresource.
var scaledKinds = []schema.GroupKind{{Group: "apps", Kind: "Deployment"}, {Group: "apps", Kind: "StatefulSet"}, {Group: "apps", Kind: "ReplicaSet"}}

// unownedReplicas reports replicas Git leaves to the default that hold another value nobody
// owns: a write through the scale subresource (kubectl scale) to a field no manager owned
// records no owner, so no managedFields entry shows it. An autoscaled object's replicas are its
// autoscaler's.
func unownedReplicas(gk schema.GroupKind, desired, live map[string]any, os []*owner, defaulted func() map[string]any, opts *Options, seen map[string]bool) (rawDiff, bool) {
	if defaulted == nil || !slices.Contains(scaledKinds, gk) || seen[replicasPath.String()] {
		return rawDiff{}, false
	}
	if _, declared := valueAt(desired, replicasPath); declared || len(ownersAt(os, replicasPath)) > 0 {
		return rawDiff{}, false
	}
	lv, ok := valueAt(live, replicasPath)
	dv, ok2 := valueAt(defaulted(), replicasPath)
	if !ok || !ok2 || scalarEqual(lv, dv, false) {
		return rawDiff{}, false
	}
	md, _ := live["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	if opts.Autoscaled != nil && opts.Autoscaled(gk, ns, name) {
		return rawDiff{}, false
	}
	seen[replicasPath.String()] = true
	return rawDiff{path: replicasPath, desired: dv, live: lv, change: Changed}, true
}
