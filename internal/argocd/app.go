// Package argocd reads what the auditor needs from Argo CD's Application — the synced revision,
// the source, the destination, ignoreDifferences — and runs Argo CD's own diff and normalizers.
// It is the one place that knows Argo CD's types.
package argocd

import (
	"fmt"
	"strings"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
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
	// SyncedRevision is the commit the cluster was last synced to: status.sync.revision, or for a
	// multi-source Application the entry of status.sync.revisions of the source audited.
	SyncedRevision string
	rawIgnores     []v1alpha1.ResourceIgnoreDifferences
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
	a := &App{Name: app.Name, Namespace: app.Namespace, DestinationNamespace: app.Spec.Destination.Namespace,
		rawIgnores: app.Spec.IgnoreDifferences}
	switch {
	case len(app.Spec.Sources) > 0:
		i := 0
		for j, s := range app.Spec.Sources {
			if strings.HasPrefix(s.Path, "overlays/") {
				i = j
				break
			}
		}
		s := app.Spec.Sources[i]
		a.RepoURL, a.TargetRevision, a.Path = s.RepoURL, s.TargetRevision, s.Path
		if i < len(app.Status.Sync.Revisions) {
			a.SyncedRevision = app.Status.Sync.Revisions[i]
		}
	case app.Spec.Source != nil:
		a.RepoURL, a.TargetRevision, a.Path = app.Spec.Source.RepoURL, app.Spec.Source.TargetRevision, app.Spec.Source.Path
		a.SyncedRevision = app.Status.Sync.Revision
	}
	return a, nil
}
