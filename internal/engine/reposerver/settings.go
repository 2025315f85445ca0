package reposerver

import (
	"context"
	"fmt"

	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/settings"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
)

// Settings are the argocd-cm settings the controller puts in every manifest request.
type Settings struct {
	AppLabelKey, TrackingMethod, InstallationID string
	Kustomize                                   *v1alpha1.KustomizeOptions
	Helm                                        *v1alpha1.HelmOptions
	EnabledSourceTypes                          map[string]bool
}

// SettingsFrom reads them from argocd-cm's data with Argo CD's own settings manager (v3.6.1),
// so every key and default is as the controller reads it. The manager is given that one
// ConfigMap and nothing else: the auditor never reads Argo CD's Secrets.
func SettingsFrom(ctx context.Context, data map[string]string) (Settings, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the manager's informers on the in-memory copy
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: common.ArgoCDConfigMapName, Namespace: settingsNamespace,
		Labels: map[string]string{"app.kubernetes.io/part-of": "argocd"}}, Data: data}
	mgr := settings.NewSettingsManager(ctx, fake.NewClientset(cm), settingsNamespace)
	var s Settings
	var err error
	if s.AppLabelKey, err = mgr.GetAppInstanceLabelKey(); err != nil {
		return Settings{}, fmt.Errorf("argocd-cm: %w", err)
	}
	if s.TrackingMethod, err = mgr.GetTrackingMethod(); err != nil {
		return Settings{}, fmt.Errorf("argocd-cm: %w", err)
	}
	if s.InstallationID, err = mgr.GetInstallationID(); err != nil {
		return Settings{}, fmt.Errorf("argocd-cm: %w", err)
	}
	if s.Kustomize, err = mgr.GetKustomizeSettings(); err != nil {
		return Settings{}, fmt.Errorf("argocd-cm: %w", err)
	}
	if s.Helm, err = mgr.GetHelmSettings(); err != nil {
		return Settings{}, fmt.Errorf("argocd-cm: %w", err)
	}
	if s.EnabledSourceTypes, err = mgr.GetEnabledSourceTypes(); err != nil {
		return Settings{}, fmt.Errorf("argocd-cm: %w", err)
	}
	return s, nil
}

// settingsNamespace is where the in-memory copy of argocd-cm is read from.
const settingsNamespace = "argocd"

// Untrack takes out of objs the tracking metadata the repo-server writes in (the tracking
// annotation, or the instance label with label tracking): Argo CD's bookkeeping, not Git's.
func Untrack(objs []*unstructured.Unstructured, s Settings) {
	for _, o := range objs {
		if s.AppLabelKey == "" {
			return
		}
		if a := o.GetAnnotations(); a != nil && s.TrackingMethod != string(v1alpha1.TrackingMethodLabel) {
			if _, ok := a[TrackingAnnotation]; ok {
				delete(a, TrackingAnnotation)
				o.SetAnnotations(a)
				if len(a) == 0 {
					unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
				}
			}
		}
		if l := o.GetLabels(); l != nil && s.TrackingMethod != string(v1alpha1.TrackingMethodAnnotation) {
			if _, ok := l[s.AppLabelKey]; ok {
				delete(l, s.AppLabelKey)
				o.SetLabels(l)
				if len(l) == 0 {
					unstructured.RemoveNestedField(o.Object, "metadata", "labels")
				}
			}
		}
	}
}

// TrackingAnnotation is the annotation Argo CD tracks its objects by.
const TrackingAnnotation = common.AnnotationKeyAppInstance
