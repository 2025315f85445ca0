package drift

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// managedFieldsPath is where the API server records who owns each field.
var managedFieldsPath = fieldpath.MakePathOrDie("metadata", "managedFields")

// OwnersCleared is the live value of the field that reports a write that cleared managedFields.
const OwnersCleared = "cleared: the API server's record of who owns each field is gone"

// ownershipLost returns the difference that reports a write that cleared l's managedFields: a
// version the watch saw (versions, newest first) with none left, the before-first-apply entry an
// apply leaves on a cleared object, or an object whose applier has no entry while a field Git
// declares has no owner. Who made it comes from the watch when it saw the write. ok is false
// when managedFields look as the API server keeps them. A write that replaces them with forged
// entries is not told apart from the API server's own bookkeeping (server-side apply leaves
// defaulted fields unowned, Argo CD renames client-side apply entries): it is not reported.
func ownershipLost(l *unstructured.Unstructured, versions []*unstructured.Unstructured, desired map[string]any, os []*owner, applier string) (rawDiff, *Writer, bool) {
	for i := 0; i+1 < len(versions); i++ {
		newer, older := versions[i].GetManagedFields(), versions[i+1].GetManagedFields()
		if len(newer) == 0 && len(older) > 0 {
			return rawDiff{path: managedFieldsPath, live: OwnersCleared, change: Changed}, changedEntry(older, newer), true
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
	var added []fieldpath.Path
	for _, p := range minimal(cmp.Added) {
		// A labels or annotations map Git has none of: its keys, each judged on its own.
		if len(p) == 2 && p[0].FieldName != nil && *p[0].FieldName == "metadata" && p[1].FieldName != nil &&
			(*p[1].FieldName == "labels" || *p[1].FieldName == "annotations") {
			m, _ := valueAt(live, p)
			mm, _ := m.(map[string]any)
			for _, k := range sortedKeys(mm) {
				added = append(added, append(p[:2:2], fieldpath.PathElement{FieldName: &k}))
			}
			continue
		}
		added = append(added, p)
	}
	for _, p := range added {
		if !countsForAdded(p) || trackingField(p) || seen[p.String()] || hasUnderAny(os, p) || ruleCovers(opts, gvk.GroupKind(), p, true) {
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
// manager; with autoscaled false, rules for autoscaled objects only are left out.
func ruleCovers(opts *Options, gk schema.GroupKind, p fieldpath.Path, autoscaled bool) bool {
	for _, r := range opts.Controllers {
		if (!r.Autoscaled || autoscaled) && r.appliesTo(gk) && r.covers(p) {
			return true
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
	if opts.Autoscaled != nil && opts.Autoscaled(gk, ns, name) || ruleCovers(opts, gk, replicasPath, false) {
		return rawDiff{}, false
	}
	seen[replicasPath.String()] = true
	return rawDiff{path: replicasPath, desired: dv, live: lv, change: Changed}, true
}
