package check

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync/hook"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// AppRender is one Application of an env's app-of-apps besides the env's own, as check rendered
// it from Git: its path, how many objects it declares, or why it was not rendered.
type AppRender struct {
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Objects int    `json:"objects"`
	Error   string `json:"error,omitempty"`
}

// notChecked is the risk of an Application check does not render: no rule runs on its objects.
const notChecked = "its objects are not checked"

// otherApplications renders every Application of apps/<env> (read from apps, the revision the
// env's app-of-apps syncs) but the env's own that syncs a path of the platform repository (the
// env's Application's), from src (the revision the env runs: its pin), as Argo CD would: a
// kustomization, a Helm chart with the Application's helm options, or a plain directory. The
// check's rules then run on their objects too. An Application check cannot render (a chart
// repository, another repository, a plugin) is a warning naming why; a render that fails is a
// violation: Argo CD would fail it too.
func otherApplications(apps, src render.Source, env layout.Env) (objs [][]*unstructured.Unstructured, out []AppRender, violations, warnings []Violation, err error) {
	res, err := appsOf(apps, env.Name)
	if err != nil || res == nil {
		return nil, nil, nil, nil, err
	}
	own := func(o *unstructured.Unstructured) bool { return env.Overlay != "" && syncsPath(o, env.Overlay) }
	platform := rootRepo(apps, env)
	for _, o := range res.Objects {
		if isApplication(o) && own(o) {
			platform, _, _ = unstructured.NestedString(o.Object, "spec", "source", "repoURL")
		}
	}
	// Followed down: an Application whose render declares Applications is an app-of-apps too.
	queue, seen := slices.Clone(res.Objects), map[string]bool{}
	for ; len(queue) > 0; queue = queue[1:] {
		o := queue[0]
		if isApplicationSet(o) {
			warnings = append(warnings, Violation{Rule: "application-renders", Object: "ApplicationSet " + o.GetName(), Risk: notChecked,
				Message: "not rendered: the Applications it generates come from its generators and the cluster's state; check reads Git alone"})
			continue
		}
		if !isApplication(o) || own(o) || seen[o.GetNamespace()+"/"+o.GetName()] {
			continue
		}
		seen[o.GetNamespace()+"/"+o.GetName()] = true
		name := "Application " + o.GetName()
		app, err := argocd.FromUnstructured(o)
		if err != nil {
			violations = append(violations, Violation{Rule: "application-renders", Object: name, Message: err.Error()})
			continue
		}
		ar := AppRender{Name: app.Name, Path: app.Path}
		if app, err = app.WithOverrides(func(_, name string) ([]byte, error) { return src.ReadFile(name) }); err == nil {
			err = app.TypeError()
		}
		if err != nil {
			ar.Error = err.Error()
			violations = append(violations, Violation{Rule: "application-renders", Object: name, Message: err.Error()})
			out = append(out, ar)
			continue
		}
		ar.Error = notRendered(app, platform, src)
		if ar.Error != "" {
			warnings = append(warnings, Violation{Rule: "application-renders", Object: name, Message: ar.Error, Risk: notChecked})
			out = append(out, ar)
			continue
		}
		rendered, err := renderApplication(src, app)
		var mine []*unstructured.Unstructured
		for _, r := range rendered {
			for _, o := range withDestination(r.Objects, app.DestinationNamespace) {
				// A Skip object is never applied, a Helm test hook never run by Argo CD; other
				// hooks are created through the API server, its admission policies included.
				if !hook.Skip(o) && !helmTest(o) {
					mine = append(mine, o)
				}
			}
		}
		ar.Objects = len(mine)
		if len(mine) > 0 {
			objs = append(objs, mine)
		}
		for _, m := range mine {
			if isApplication(m) || isApplicationSet(m) {
				queue = append(queue, m)
			}
		}
		var limit *render.LimitError
		switch {
		case errors.As(err, &limit):
			ar.Error = "not rendered: " + err.Error()
			warnings = append(warnings, Violation{Rule: "application-renders", Object: name, Message: ar.Error, Risk: notChecked})
		case err != nil:
			ar.Error = err.Error()
			violations = append(violations, Violation{Rule: "application-renders", Object: name, Message: err.Error()})
		}
		out = append(out, ar)
	}
	return objs, out, violations, warnings, nil
}

// notRendered says why check does not render app, whose platform repository is platform: ""
// when it renders it.
func notRendered(app *argocd.App, platform string, src render.Source) string {
	switch {
	case app.Unrenderable != "":
		return "not rendered: " + app.Unrenderable
	case app.Chart != "":
		return fmt.Sprintf("not rendered: Helm chart %s %s from %s: check renders from Git and fetches no chart repository", app.Chart, app.TargetRevision, app.RepoURL)
	case platform != "" && otherRepo(app, platform) != "":
		return "not rendered: its source is another repository (" + otherRepo(app, platform) + ")"
	case platform == "" && len(app.Sources) == 0 && !src.Has(app.Path):
		return "not rendered: no " + app.Path + " in this repository (is its source another repository?)"
	case len(app.KustomizeUnsupported) > 0:
		return fmt.Sprintf("not rendered: kustomize options the auditor does not apply (%v)", app.KustomizeUnsupported)
	}
	return ""
}

// rootRepo is the repository env's root reads (its manifest's repoURL), "" when Git holds no
// manifest of the root.
func rootRepo(src render.Source, env layout.Env) string {
	root, err := rootApplication(src, env)
	if err != nil || root == nil {
		return ""
	}
	return root.RepoURL
}

// rootApplication is env's root Application as Git declares it (its rootManifest), nil when the
// layout names no manifest of it.
func rootApplication(src render.Source, env layout.Env) (*argocd.App, error) {
	if env.RootManifest == "" {
		return nil, nil
	}
	data, err := src.ReadFile(env.RootManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // the convention's root manifest, which a repository may not keep
	}
	if err != nil {
		return nil, err
	}
	obj, err := layout.RootApplication(data, env.Root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env.RootManifest, err)
	}
	return argocd.FromUnstructured(&unstructured.Unstructured{Object: obj})
}

func isApplicationSet(o *unstructured.Unstructured) bool {
	return o.GetKind() == "ApplicationSet" && o.GroupVersionKind().Group == "argoproj.io"
}

// helmTest says whether o is a Helm test hook and no Argo CD hook: Argo CD never runs it.
func helmTest(o *unstructured.Unstructured) bool {
	a := o.GetAnnotations()
	if _, argo := a["argocd.argoproj.io/hook"]; argo {
		return false
	}
	for _, t := range strings.Split(a["helm.sh/hook"], ",") {
		if t = strings.TrimSpace(t); t == "test" || t == "test-success" || t == "test-failure" {
			return true
		}
	}
	return false
}

// otherRepo is the first repository among the Application's sources that is not platform, or "".
func otherRepo(app *argocd.App, platform string) string {
	if !argocd.SameRepo(app.RepoURL, platform) {
		return app.RepoURL
	}
	for _, s := range app.Sources {
		if (s.Path != "" || s.Ref != "") && !argocd.SameRepo(s.RepoURL, platform) {
			return s.RepoURL
		}
	}
	return ""
}

// renderApplication renders an Application's sources with a path from src. Offline there is no
// destination cluster: charts get helm's default version and API versions. A ref source's value
// files are read from src too (the env's revision).
func renderApplication(src render.Source, app *argocd.App) ([]*render.Result, error) {
	type one struct {
		path string
		v    render.Variant
	}
	var todo []one
	if len(app.Sources) < 2 {
		k, err := app.KustomizeOptions(src.Revision())
		if err != nil {
			return nil, err
		}
		todo = append(todo, one{app.Path, render.Variant{Kustomize: k, Patches: app.KustomizePatches, Helm: app.HelmOptions(src.Revision(), argocd.Cluster{}),
			Directory: app.DirectoryOptions(src.Revision())}})
	}
	for j, s := range app.Sources {
		if s.Path == "" {
			continue
		}
		if len(s.KustomizeUnsupported) > 0 {
			return nil, fmt.Errorf("source %d sets kustomize options the auditor does not apply yet (%v)", j+1, s.KustomizeUnsupported)
		}
		h := app.SourceHelmOptions(j, src.Revision(), argocd.Cluster{})
		for _, f := range h.ValueFiles {
			ref, rest, _ := strings.Cut(f, "/")
			for _, r := range app.Sources {
				if r.Ref != "" && "$"+r.Ref == ref {
					data, err := src.ReadFile(path.Clean(strings.TrimPrefix(rest, "/")))
					if err != nil && !h.IgnoreMissingValueFiles {
						return nil, fmt.Errorf("source %d: values file %s: %w", j+1, f, err)
					}
					if err == nil {
						if h.RefValues == nil {
							h.RefValues = map[string]string{}
						}
						h.RefValues[f] = string(data)
					}
				}
			}
		}
		h.ValueFiles = slices.DeleteFunc(h.ValueFiles, func(f string) bool {
			_, read := h.RefValues[f]
			return strings.HasPrefix(f, "$") && !read && h.IgnoreMissingValueFiles
		})
		k, err := app.SourceKustomizeOptions(j, src.Revision())
		if err != nil {
			return nil, err
		}
		todo = append(todo, one{s.Path, render.Variant{Kustomize: k, Patches: s.KustomizePatches, Helm: h, Directory: app.SourceDirectoryOptions(j, src.Revision())}})
	}
	// Every source is rendered: a limit in one does not hide a failure in another. The error is
	// a LimitError only when every failure is one.
	var out []*render.Result
	var errs []error
	limits := true
	for j, o := range todo {
		target := render.AppTarget(o.path)
		s, err := src.WithVariant(target, o.v)
		var r *render.Result
		if err == nil {
			r, err = render.Engine{}.Render(context.Background(), s, render.Target{Name: target})
		}
		if err != nil {
			var limit *render.LimitError
			limits = limits && errors.As(err, &limit)
			if len(todo) > 1 {
				err = fmt.Errorf("source %s (%d): %w", o.path, j+1, err)
			}
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	switch {
	case len(errs) == 0:
		return out, nil
	case limits:
		return out, &render.LimitError{Msg: errors.Join(errs...).Error()}
	}
	return out, errors.Join(errs...)
}

// clusterScoped are the built-in kinds of the Kubernetes API that have no namespace (kubectl
// api-resources --namespaced=false), by group/kind.
var clusterScoped = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true, "/ComponentStatus": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"apiextensions.k8s.io/CustomResourceDefinition": true, "apiregistration.k8s.io/APIService": true,
	"storage.k8s.io/StorageClass": true, "storage.k8s.io/CSIDriver": true, "storage.k8s.io/CSINode": true,
	"storage.k8s.io/VolumeAttachment": true, "storage.k8s.io/VolumeAttributesClass": true,
	"scheduling.k8s.io/PriorityClass": true, "node.k8s.io/RuntimeClass": true,
	"networking.k8s.io/IngressClass": true, "networking.k8s.io/IPAddress": true, "networking.k8s.io/ServiceCIDR": true,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration":   true,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":     true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy":        true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicy":          true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicyBinding":   true,
	"flowcontrol.apiserver.k8s.io/FlowSchema":                       true,
	"flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration":       true,
	"certificates.k8s.io/CertificateSigningRequest":                 true,
	"resource.k8s.io/DeviceClass":                                   true,
}

// withDestination gives each namespaced object without a namespace the Application's
// destination namespace, as Argo CD does when it applies it. Scope is the API's: the built-in
// kinds, and the CustomResourceDefinitions the render itself declares (spec.scope). Objects are
// copied before they change.
func withDestination(objs []*unstructured.Unstructured, ns string) []*unstructured.Unstructured {
	if ns == "" {
		return objs
	}
	scoped := map[string]bool{}
	for k := range clusterScoped {
		scoped[k] = true
	}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			g, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			k, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			if s, _, _ := unstructured.NestedString(o.Object, "spec", "scope"); s == "Cluster" {
				scoped[g+"/"+k] = true
			}
		}
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o
		if o.GetNamespace() == "" && !scoped[o.GroupVersionKind().Group+"/"+o.GetKind()] {
			out[i] = o.DeepCopy()
			out[i].SetNamespace(ns)
		}
	}
	return out
}
