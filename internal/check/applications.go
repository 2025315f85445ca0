package check

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/render"
)

// AppRender is one Application of an env's app-of-apps besides the env's own, as check rendered
// it from Git: its path, how many objects it declares, or why it was not rendered.
type AppRender struct {
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Objects int    `json:"objects"`
	Error   string `json:"error,omitempty"`
}

// otherApplications renders every Application of apps/<env> (read from apps, the revision the
// env's app-of-apps syncs) but the env's own that syncs a path of the platform repository (the
// env's Application's), from src (the revision the env runs: its pin), as Argo CD would: a
// kustomization, a Helm chart with the Application's helm options, or a plain directory. The
// check's rules then run on their objects too. An Application check cannot render (a chart
// repository, another repository, a plugin) is a warning naming why; a render that fails is a
// violation: Argo CD would fail it too.
func otherApplications(apps, src render.Source, env string) (objs []*unstructured.Unstructured, out []AppRender, violations, warnings []Violation, err error) {
	res, err := apps.RenderApps(env)
	if err != nil || res == nil {
		return nil, nil, nil, nil, err
	}
	platform := ""
	for _, o := range res.Objects {
		if isApplication(o) && syncsPath(o, render.OverlayPath(env)) {
			platform, _, _ = unstructured.NestedString(o.Object, "spec", "source", "repoURL")
		}
	}
	for _, o := range res.Objects {
		if !isApplication(o) || syncsPath(o, render.OverlayPath(env)) {
			continue
		}
		name := "Application " + o.GetName()
		app, err := argocd.FromUnstructured(o)
		if err != nil {
			violations = append(violations, Violation{Rule: "application-renders", Object: name, Message: err.Error()})
			continue
		}
		ar := AppRender{Name: app.Name, Path: app.Path}
		switch {
		case app.Unrenderable != "":
			ar.Error = "not rendered: " + app.Unrenderable
		case platform != "" && !argocd.SameRepo(app.RepoURL, platform):
			ar.Error = "not rendered: its source is another repository (" + app.RepoURL + ")"
		case len(app.KustomizeUnsupported) > 0:
			ar.Error = fmt.Sprintf("not rendered: kustomize options the auditor does not apply yet (%v)", app.KustomizeUnsupported)
		}
		if ar.Error != "" {
			warnings = append(warnings, Violation{Rule: "application-renders", Object: name, Message: ar.Error})
			out = append(out, ar)
			continue
		}
		target := render.AppTarget(app.Path)
		s, err := src.WithPatches(target, app.KustomizePatches)
		if err == nil {
			// Offline there is no destination cluster: helm's default version and API versions.
			var r *render.Result
			if r, err = s.WithHelm(app.HelmOptions(src.Revision(), argocd.Cluster{})).Render(target); err == nil {
				ar.Objects = len(r.Objects)
				objs = append(objs, withDestination(r.Objects, app.DestinationNamespace)...)
			}
		}
		if err != nil {
			ar.Error = err.Error()
			violations = append(violations, Violation{Rule: "application-renders", Object: name, Message: err.Error()})
		}
		out = append(out, ar)
	}
	return objs, out, violations, warnings, nil
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
