package doctor

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/argoproj/argo-cd/v3/resource_customizations"
)

// healthChecks says how Argo CD assesses the health of each custom kind the render uses: its
// built-in Lua check, a customization in argocd-cm, or none (Healthy at once: later sync waves do
// not wait for it). Informational: none fails.
func healthChecks(ctx context.Context, kube kubernetes.Interface, objs []*unstructured.Unstructured, ns string) []Check {
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "argocd-cm", metav1.GetOptions{})
	if err != nil {
		detail := "argocd-cm not readable in " + ns + ": " + err.Error()
		if apierrors.IsNotFound(err) {
			detail = "no argocd-cm in " + ns + ": Argo CD is not installed there"
		}
		return []Check{{Area: "argocd", Name: "Argo CD health checks", OK: true, Skipped: true, Detail: detail}}
	}
	seen := map[schema.GroupKind]bool{}
	var out []Check
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if seen[gk] || !strings.Contains(gk.Group, ".") || strings.HasSuffix(gk.Group, ".k8s.io") && gk.Group != "gateway.networking.k8s.io" {
			continue // core and built-in groups: Argo CD's Go health checks or none
		}
		seen[gk] = true
		c := Check{Area: "argocd", Name: "health of " + gk.Kind + "." + gk.Group, OK: true}
		key := "resource.customizations.health." + strings.ReplaceAll(gk.Group, "/", "_") + "_" + gk.Kind
		switch {
		case cm.Data[key] != "":
			c.Detail = "customized in argocd-cm (" + key + ")"
			if strings.Contains(cm.Data[key], `hs.status = "Healthy"`) && !strings.Contains(cm.Data[key], "if ") {
				c.Detail += ": always Healthy, whatever the object's status"
			}
		case builtinHealth(gk):
			c.Detail = "Argo CD's built-in check"
		default:
			c.Detail = "no health check: Argo CD counts it Healthy at once"
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func builtinHealth(gk schema.GroupKind) bool {
	_, err := fs.Stat(resource_customizations.Embedded, path.Join(gk.Group, gk.Kind, "health.lua"))
	return err == nil
}

// auditorChecks: the auditor's ServiceAccount, once synced, may list and watch every kind the
// env renders where it renders it.
func auditorChecks(ctx context.Context, kube kubernetes.Interface, objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource, sa string) []Check {
	ns, name, _ := strings.Cut(sa, "/")
	name0 := "auditor's read access (" + sa + ")"
	if _, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		detail := "ServiceAccount " + sa + " not readable: " + err.Error()
		if apierrors.IsNotFound(err) {
			detail = "ServiceAccount " + sa + " not there yet: the first sync creates it"
		}
		return []Check{{Area: "auditor", Name: name0, OK: true, Skipped: true, Detail: detail}}
	}
	user := "system:serviceaccount:" + ns + ":" + name
	type key struct {
		gvr schema.GroupVersionResource
		ns  string
	}
	seen := map[key]bool{}
	var denied []string
	checked := 0
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		r, ok := served[gvk.GroupVersion()][gvk.Kind]
		if !ok {
			continue
		}
		res := r.name
		k := key{schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: res}, ""}
		if r.namespaced {
			k.ns = o.GetNamespace()
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		for _, verb := range []string{"list", "watch"} {
			checked++
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: k.ns, Verb: verb, Group: gvk.Group, Resource: res,
				},
			}}
			got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				return []Check{{Area: "auditor", Name: name0, Detail: "cannot ask the API server: " + err.Error(), Fix: "run doctor as a user who may create SubjectAccessReviews"}}
			}
			if !got.Status.Allowed {
				where := "cluster-wide"
				if k.ns != "" {
					where = "in " + k.ns
				}
				denied = append(denied, fmt.Sprintf("%s %s %s", verb, path.Join(gvk.Group, res), where))
			}
		}
	}
	c := Check{Area: "auditor", Name: name0, OK: len(denied) == 0, Detail: fmt.Sprintf("%d list and watch permissions checked", checked)}
	if !c.OK {
		shown := denied
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("%d more", len(denied)-5))
		}
		c.Detail = "denied: " + strings.Join(shown, "; ")
		c.Fix = "grant them in base/auditor/rbac.yaml (read only: get, list, watch)"
	}
	return []Check{c}
}
