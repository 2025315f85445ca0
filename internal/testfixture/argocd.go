package testfixture

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/testcluster"
)

// createApplication applies the env's Application from the fixture's apps/ tree, as a person
// bootstrapping the cluster would: its source is the fixture's repository; its automated sync
// keeps prune and takes selfHeal from the options (Git says true; tests that look at hand edits
// need Argo CD to leave them in place), or is removed for ManualSync.
func (f *Platform) createApplication() {
	f.t.Helper()
	u := f.applicationManifest()
	must(f.t, unstructured.SetNestedField(u.Object, "file://"+f.Dir, "spec", "source", "repoURL"))
	if f.opts.ManualSync {
		unstructured.RemoveNestedField(u.Object, "spec", "syncPolicy", "automated")
	} else {
		must(f.t, unstructured.SetNestedField(u.Object, f.opts.SelfHeal, "spec", "syncPolicy", "automated", "selfHeal"))
	}
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		f.t.Fatal(err)
	}
	file := filepath.Join(f.t.TempDir(), "application.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.Kubectl("apply", "--server-side", "-f", file)
	// The test's repository goes with the test: delete the Application first, and with it (its
	// resources finalizer) everything it synced, so no Application reconciles a repository that is
	// gone and no pods hold the nodes later tests need.
	f.t.Cleanup(f.deleteApplication)
}

func (f *Platform) deleteApplication() {
	ctx := context.Background()
	apps := f.dynamic().Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace)
	if err := apps.Delete(ctx, f.App(), metav1.DeleteOptions{}); err != nil {
		f.t.Logf("delete Application %s: %v", f.App(), err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := apps.Get(ctx, f.App(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		f.t.Logf("Application %s not gone after 3 min: %v", f.App(), err)
	}
}

// applicationManifest reads the env's Application from the fixture's apps/ tree.
func (f *Platform) applicationManifest() *unstructured.Unstructured {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.Dir, "apps", f.Env, "llm-"+f.Env+".yaml"))
	if err != nil {
		f.t.Fatal(err)
	}
	var app map[string]any
	if err := yaml.Unmarshal(data, &app); err != nil {
		f.t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: app}
}

func must(t interface{ Fatal(...any) }, err error) {
	if err != nil {
		t.Fatal(err)
	}
}

// Application returns the fixture's Application as the cluster holds it.
func (f *Platform) Application() *unstructured.Unstructured {
	f.t.Helper()
	app, err := f.dynamic().Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).Get(context.Background(), f.App(), metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return app
}

// Refresh asks Argo CD to compare the Application again now (the annotation `argocd app get
// --refresh` sets) and returns once the controller has done so.
func (f *Platform) Refresh() {
	f.t.Helper()
	before := f.reconciledAt()
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
	_, err := f.dynamic().Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).Patch(context.Background(), f.App(),
		types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "testfixture"})
	if err != nil {
		f.t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		app := f.Application()
		_, pending := app.GetAnnotations()["argocd.argoproj.io/refresh"]
		return !pending && f.reconciledAt() != before, nil
	})
	if err != nil {
		f.t.Fatalf("Argo CD did not refresh %s: %v", f.App(), err)
	}
}

func (f *Platform) reconciledAt() string {
	s, _, _ := unstructured.NestedString(f.Application().Object, "status", "reconciledAt")
	return s
}

// ArgoSync asks Argo CD to sync the Application to rev now, as `argocd app sync --revision` does
// (it sets the Application's operation), and waits until it has.
func (f *Platform) ArgoSync(rev string) {
	f.t.Helper()
	// The operation carries the Application's sync options (ServerSideApply=true), as argocd-server
	// puts them into the operations it starts.
	opts, _, _ := unstructured.NestedStringSlice(f.Application().Object, "spec", "syncPolicy", "syncOptions")
	patch, err := json.Marshal(map[string]any{"operation": map[string]any{
		"initiatedBy": map[string]any{"username": "testfixture"},
		"sync":        map[string]any{"revision": rev, "syncOptions": opts, "syncStrategy": map[string]any{"hook": map[string]any{}}},
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = f.dynamic().Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).Patch(context.Background(), f.App(),
		types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "testfixture"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.WaitSynced(rev)
}

// WaitSynced waits until Argo CD has synced rev (see testcluster.Cluster.WaitSynced); a failed
// sync operation fails the test with Argo CD's messages.
func (f *Platform) WaitSynced(rev string) {
	f.t.Helper()
	if err := f.cluster.WaitSynced(context.Background(), f.App(), rev, 4*time.Minute); err != nil {
		f.t.Fatal(err)
	}
}

func (f *Platform) dynamic() dynamic.Interface {
	f.t.Helper()
	dc, err := f.cluster.Dynamic()
	if err != nil {
		f.t.Fatal(err)
	}
	return dc
}
