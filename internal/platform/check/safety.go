package check

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const syncOptionsAnnotation = "argocd.argoproj.io/sync-options"

// retainStateful checks that every object holding data Git cannot recreate survives its
// Application: the Applications carry the cascade finalizer and prune, so removing or renaming one
// (or dropping the object from the render) deletes the object, and with it the data. Argo CD keeps
// an object on Application deletion with the sync option Delete=false and on prune with
// Prune=false (annotation argocd.argoproj.io/sync-options, comma-separated). Stateful objects:
//   - PersistentVolumeClaims (the model cache);
//   - StatefulSets with volumeClaimTemplates: their claims carry no Argo CD tracking and survive
//     Argo CD, but not a StatefulSet whose persistentVolumeClaimRetentionPolicy.whenDeleted is
//     Delete, and the set itself is what the data is mounted by;
//   - CloudNativePG Clusters, which own their claims (deleting the Cluster deletes the database);
//   - Namespaces, whose deletion deletes every claim in them, controller-made ones included.
func retainStateful(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, o := range objs {
		what := statefulKind(o)
		if what == "" {
			continue
		}
		opts := syncOptions(o)
		var missing []string
		for _, want := range []string{"Delete", "Prune"} {
			if opts[want] != "false" { // Argo CD matches the option exactly
				missing = append(missing, want+"=false")
			}
		}
		if len(missing) > 0 {
			out = append(out, Violation{Rule: "stateful-retain", Object: id(o), Message: fmt.Sprintf(
				"%s is %s but its annotation %s lacks %s: deleting or renaming the Argo CD Application (cascade finalizer) or pruning deletes it and its data; set %s: Delete=false,Prune=false (keeping its other options)",
				id(o), what, syncOptionsAnnotation, strings.Join(missing, ","), syncOptionsAnnotation)})
		}
		if o.GetKind() == "StatefulSet" {
			if p, _, _ := unstructured.NestedString(o.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted"); p == "Delete" {
				out = append(out, Violation{Rule: "stateful-retain", Object: id(o),
					Message: id(o) + " has persistentVolumeClaimRetentionPolicy.whenDeleted: Delete: its claims (the data) go with it whatever Argo CD keeps; use Retain"})
			}
		}
	}
	return out
}

// statefulKind says why o holds data ("" when it does not).
func statefulKind(o *unstructured.Unstructured) string {
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		return "a PersistentVolumeClaim"
	case schema.GroupKind{Kind: "Namespace"}:
		return "a Namespace (deleting it deletes every claim in it)"
	case schema.GroupKind{Group: "postgresql.cnpg.io", Kind: "Cluster"}:
		return "a CloudNativePG Cluster (it owns its database's claims)"
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		if vct, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates"); len(vct) > 0 {
			return "a StatefulSet with volumeClaimTemplates"
		}
	}
	return ""
}

// syncOptions parses the sync-options annotation ("Delete=false,Prune=false,ServerSideApply=true").
func syncOptions(o *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, opt := range strings.Split(o.GetAnnotations()[syncOptionsAnnotation], ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(opt), "=")
		if k != "" {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
