package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// ArgoManager is the field manager Argo CD's server-side sync uses.
const ArgoManager = "argocd-controller"

// TrackingAnnotation is the annotation Argo CD writes to track which Application owns an object.
const TrackingAnnotation = "argocd.argoproj.io/tracking-id"

// ApplicationGVR is the Argo CD Application resource.
var ApplicationGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// Syncer reproduces what Argo CD does on a server-side sync: every object is applied with field
// manager argocd-controller, forced, carrying the tracking annotation; then the Application records
// the synced revision in status.sync.revision.
type Syncer struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	// LabelTracking tracks objects with Argo CD's label (app.kubernetes.io/instance), as its
	// application.resourceTrackingMethod: label does, instead of the tracking annotation: a
	// manifest without annotations is then applied without any.
	LabelTracking bool
}

// NewSyncer builds a Syncer for the cluster behind cfg.
func NewSyncer(cfg *rest.Config) (*Syncer, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000 // a local test server: client-side throttling only slows the sync
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("syncer: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("syncer: %w", err)
	}
	return &Syncer{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Sync applies objs as Argo CD's Application appName would, namespaces first. With dryRun the
// API server validates and defaults every object without persisting it.
func (s *Syncer) Sync(ctx context.Context, appName string, objs []*unstructured.Unstructured, dryRun bool) error {
	ordered := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ordered = append(ordered, o)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "Namespace" {
			ordered = append(ordered, o)
		}
	}
	for _, o := range ordered {
		if err := s.apply(ctx, appName, o, dryRun); err != nil {
			return err
		}
	}
	return nil
}

func (s *Syncer) apply(ctx context.Context, appName string, o *unstructured.Unstructured, dryRun bool) error {
	obj := o.DeepCopy()
	gvk := obj.GroupVersionKind()
	if s.LabelTracking {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["app.kubernetes.io/instance"] = appName
		obj.SetLabels(l)
		return s.applyAs(ctx, obj, ArgoManager, dryRun)
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[TrackingAnnotation] = fmt.Sprintf("%s:%s/%s:%s/%s", appName, gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
	obj.SetAnnotations(ann)
	return s.applyAs(ctx, obj, ArgoManager, dryRun)
}

// ApplyAs server-side applies obj under field manager, forced.
func (s *Syncer) ApplyAs(ctx context.Context, obj *unstructured.Unstructured, manager string) error {
	return s.applyAs(ctx, obj, manager, false)
}

func (s *Syncer) applyAs(ctx context.Context, obj *unstructured.Unstructured, manager string, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: manager, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var ri dynamic.ResourceInterface = s.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = s.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// RecordSync creates or updates the Application app (as read from the repository's apps/ tree)
// with source repoURL and a status saying revision is synced, as Argo CD's controller records it.
func (s *Syncer) RecordSync(ctx context.Context, app *unstructured.Unstructured, repoURL, revision string) error {
	obj := app.DeepCopy()
	if obj.GetNamespace() == "" {
		obj.SetNamespace("argocd")
	}
	obj.SetFinalizers(nil) // no Argo CD controller runs here to remove them
	if err := s.ensureNamespace(ctx, obj.GetNamespace()); err != nil {
		return err
	}
	if repoURL != "" {
		if err := unstructured.SetNestedField(obj.Object, repoURL, "spec", "source", "repoURL"); err != nil {
			return fmt.Errorf("record sync: %w", err)
		}
	}
	status := map[string]any{
		"sync":   map[string]any{"status": "Synced", "revision": revision},
		"health": map[string]any{"status": "Healthy"},
		"operationState": map[string]any{
			"phase":      "Succeeded",
			"startedAt":  time.Now().UTC().Format(time.RFC3339),
			"finishedAt": time.Now().UTC().Format(time.RFC3339),
			"operation":  map[string]any{"sync": map[string]any{"revision": revision}},
			"syncResult": map[string]any{"revision": revision},
		},
	}
	obj.Object["status"] = status
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("record sync: %w", err)
	}
	force := true
	_, err = s.dyn.Resource(ApplicationGVR).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "argocd-application-controller", Force: &force})
	if err != nil {
		return fmt.Errorf("record sync of Application %s: %w", obj.GetName(), err)
	}
	return nil
}

func (s *Syncer) ensureNamespace(ctx context.Context, name string) error {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	data, _ := json.Marshal(ns.Object)
	_, err := s.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Patch(ctx, name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "testcluster"})
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
