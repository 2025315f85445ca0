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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// createApplication applies the env's AppProject and Application from the fixture's apps/ tree,
// as a person bootstrapping the cluster would: their source is the fixture's repository; the
// Application's automated sync keeps prune and takes selfHeal from the options (Git says true;
// tests that look at hand edits need Argo CD to leave them in place), or is removed for
// ManualSync. The project is Git's (its names prefixed like the rest): Argo CD syncs the test's
// copy within exactly the namespaces and cluster-scoped kinds the project allows.
func (f *Platform) createApplication() {
	f.t.Helper()
	f.createProject()
	u := f.ApplicationAsApplied()
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

// ApplicationAsApplied is the fixture's Application as createApplication applies it: Git's, with
// the fixture's repository as its source, a cascade finalizer, and the sync policy of the options.
// A root Application that declares it declares this.
func (f *Platform) ApplicationAsApplied() *unstructured.Unstructured {
	f.t.Helper()
	u := f.applicationManifest()
	must(f.t, unstructured.SetNestedField(u.Object, "file://"+f.Dir, "spec", "source", "repoURL"))
	// Git's Application has no cascade finalizer (deleting it orphans the platform's data); the
	// test's copy is disposable and must leave the nodes to later tests, so it cascades.
	u.SetFinalizers([]string{"resources-finalizer.argocd.argoproj.io"})
	if f.opts.ManualSync {
		unstructured.RemoveNestedField(u.Object, "spec", "syncPolicy", "automated")
	} else {
		must(f.t, unstructured.SetNestedField(u.Object, f.opts.SelfHeal, "spec", "syncPolicy", "automated", "selfHeal"))
	}
	return u
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

// appProjectGVR is Argo CD's AppProject resource.
var appProjectGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}

// createProject applies the env's AppProject (apps/<env>/project.yaml) with the fixture's
// repository as its source; it goes after the Application (cleanups run last first).
func (f *Platform) createProject() {
	f.t.Helper()
	rel := filepath.Join("apps", f.Env, "project.yaml")
	if _, err := os.Stat(filepath.Join(f.Dir, rel)); err != nil {
		return // a tree without projects syncs in the default project
	}
	u := f.manifest(rel)
	must(f.t, unstructured.SetNestedStringSlice(u.Object, []string{"file://" + f.Dir}, "spec", "sourceRepos"))
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		f.t.Fatal(err)
	}
	file := filepath.Join(f.t.TempDir(), "project.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.Kubectl("apply", "--server-side", "-f", file)
	f.t.Cleanup(func() {
		err := f.dynamic().Resource(appProjectGVR).Namespace(testcluster.ArgoCDNamespace).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			f.t.Logf("delete AppProject %s: %v", u.GetName(), err)
		}
	})
}

// applicationManifest reads the env's Application from the fixture's apps/ tree.
func (f *Platform) applicationManifest() *unstructured.Unstructured {
	f.t.Helper()
	return f.manifest(filepath.Join("apps", f.Env, f.App()+".yaml"))
}

// manifest reads one object from a file of the fixture's tree.
func (f *Platform) manifest(rel string) *unstructured.Unstructured {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.Dir, rel))
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
