package check

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// cascadeFinalizer is Argo CD's cascade finalizer; its /foreground and /background forms cascade
// too.
const cascadeFinalizer = "resources-finalizer.argocd.argoproj.io"

// envApplications renders what the env's app-of-apps syncs (apps/<env>) and returns the
// Applications that sync the env's overlay; nil when the revision has no apps/<env>.
func envApplications(src render.Source, env string) ([]*unstructured.Unstructured, error) {
	res, err := appsOf(src, env)
	if err != nil || res == nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range res.Objects {
		if o.GetKind() == "Application" && o.GroupVersionKind().Group == "argoproj.io" && syncsPath(o, render.OverlayPath(env)) {
			out = append(out, o)
		}
	}
	return out, nil
}

// syncsPath says whether the Application's source (or one of its sources) is the path p.
func syncsPath(app *unstructured.Unstructured, p string) bool {
	if s, _, _ := unstructured.NestedString(app.Object, "spec", "source", "path"); path.Clean(s) == p {
		return true
	}
	srcs, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
	for _, s := range srcs {
		if m, ok := s.(map[string]any); ok {
			if sp, _ := m["path"].(string); sp != "" && path.Clean(sp) == p {
				return true
			}
		}
	}
	return false
}

// cascadeStateful checks that no Application that deletes what it synced when it is deleted (the
// cascade finalizer) syncs a stateful object Argo CD would delete with it: a PVC, a StatefulSet
// with claims, a CloudNativePG Cluster or a Namespace without the sync option Delete=false.
// Removing or renaming such an Application (issue #15: llm-prod) deletes the RAG corpus and the
// model cache. Either drop the finalizer (deleting the Application then orphans) or mark the
// object; stateful-retain asks for the annotation on its own, this rule names the Application
// that would do the deleting.
func cascadeStateful(apps, objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, app := range apps {
		fin := cascadeOf(app)
		if fin == "" {
			continue
		}
		for _, o := range objs {
			what := statefulKind(o)
			if what == "" || syncOptions(o)["Delete"] == "false" {
				continue
			}
			out = append(out, Violation{Rule: "cascade-stateful", Object: id(o), Message: fmt.Sprintf(
				"Application %s/%s has the cascade finalizer %s and syncs %s, %s, without %s: Delete=false: deleting or renaming the Application deletes it and its data; drop the finalizer or mark the object",
				app.GetNamespace(), app.GetName(), fin, id(o), what, syncOptionsAnnotation)})
		}
	}
	return out
}

// cascadeOf returns the Application's cascade finalizer, "" when it has none.
func cascadeOf(app *unstructured.Unstructured) string {
	for _, f := range app.GetFinalizers() {
		if f == cascadeFinalizer || strings.HasPrefix(f, cascadeFinalizer+"/") {
			return f
		}
	}
	return ""
}
