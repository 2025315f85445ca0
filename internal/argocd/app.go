// Package argocd reads what the auditor needs from Argo CD's Application: the synced revision,
// the source, and ignoreDifferences. It is the one place that knows Argo CD's types.
package argocd

import (
	"fmt"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/drift"
)

// ApplicationGVK is Argo CD's Application kind.
var ApplicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// App is the part of an Application the audit uses.
type App struct {
	Name, Namespace string
	RepoURL         string
	TargetRevision  string
	Path            string
	// SyncedRevision is status.sync.revision: the commit the cluster was last synced to.
	SyncedRevision string
	Ignore         []drift.IgnoreRule
	rawIgnores     []v1alpha1.ResourceIgnoreDifferences
}

// FromUnstructured reads an Application object.
func FromUnstructured(u *unstructured.Unstructured) (*App, error) {
	if u.GroupVersionKind().GroupKind() != ApplicationGVK.GroupKind() {
		return nil, fmt.Errorf("%s %s is not an Argo CD Application", u.GetKind(), u.GetName())
	}
	a := &App{Name: u.GetName(), Namespace: u.GetNamespace()}
	a.RepoURL, _, _ = unstructured.NestedString(u.Object, "spec", "source", "repoURL")
	a.TargetRevision, _, _ = unstructured.NestedString(u.Object, "spec", "source", "targetRevision")
	a.Path, _, _ = unstructured.NestedString(u.Object, "spec", "source", "path")
	a.SyncedRevision, _, _ = unstructured.NestedString(u.Object, "status", "sync", "revision")
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "ignoreDifferences")
	var err error
	if a.rawIgnores, err = parseIgnores(rules); err != nil {
		return nil, fmt.Errorf("application %s: ignoreDifferences: %w", a.Name, err)
	}
	for i, r := range rules {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("application %s: ignoreDifferences[%d] is not an object", a.Name, i)
		}
		rule := drift.IgnoreRule{}
		rule.Group, _, _ = unstructured.NestedString(m, "group")
		rule.Kind, _, _ = unstructured.NestedString(m, "kind")
		rule.Name, _, _ = unstructured.NestedString(m, "name")
		rule.Namespace, _, _ = unstructured.NestedString(m, "namespace")
		rule.JSONPointers, _, _ = unstructured.NestedStringSlice(m, "jsonPointers")
		rule.ManagedFieldsManagers, _, _ = unstructured.NestedStringSlice(m, "managedFieldsManagers")
		a.Ignore = append(a.Ignore, rule)
	}
	return a, nil
}
