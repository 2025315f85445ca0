package argocd

import (
	gescheme "github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube/scheme"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaults returns desired with what the API server's defaulting functions set on a write filled
// in — the same scheme defaulting Argo CD's diff applies to Git's objects — for the built-in
// kinds the Kubernetes scheme knows; other kinds (CRDs, defaulted from their schema) and objects
// that do not convert come back as they are. desired is not changed.
func Defaults(desired *unstructured.Unstructured) *unstructured.Unstructured {
	gvk := desired.GroupVersionKind()
	if !gescheme.Scheme.Recognizes(gvk) {
		return desired
	}
	typed, err := gescheme.Scheme.New(gvk)
	if err != nil {
		return desired
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(desired.Object, typed); err != nil {
		return desired
	}
	gescheme.Scheme.Default(typed)
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return desired
	}
	u := &unstructured.Unstructured{Object: out}
	u.SetGroupVersionKind(gvk)
	serverSets(u)
	return u
}

// serverSets fills what the API server's registry strategies (not the defaulting functions)
// store on a write: the StatefulSet strategy writes apiVersion v1 and kind
// PersistentVolumeClaim into each volumeClaimTemplate.
func serverSets(u *unstructured.Unstructured) {
	if u.GroupVersionKind() != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}) {
		return
	}
	templates, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates")
	for _, t := range templates {
		if m, ok := t.(map[string]any); ok {
			if m["apiVersion"] == nil {
				m["apiVersion"] = "v1"
			}
			if m["kind"] == nil {
				m["kind"] = "PersistentVolumeClaim"
			}
		}
	}
	if templates != nil {
		_ = unstructured.SetNestedSlice(u.Object, templates, "spec", "volumeClaimTemplates")
	}
}

// Builtin reports whether Defaults knows gvk: a kind of the Kubernetes scheme.
func Builtin(gvk schema.GroupVersionKind) bool { return gescheme.Scheme.Recognizes(gvk) }
