package doctor

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/llm-gitops/platform/internal/engine/manifest"
)

// ref is a cluster-scoped object the render names without creating it.
type ref struct {
	gvr        schema.GroupVersionResource
	kind, name string
	by         []string // the objects naming it
	fix        string
	// condition is the status condition that says the object works (a ClusterIssuer's Ready),
	// "" when existing is enough.
	condition string
}

// conditions are the status conditions that say a referenced object works: the sync waits on
// the health of what uses it (a Certificate, an ExternalSecret, a Gateway).
var conditions = map[string]string{"ClusterIssuer": "Ready", "ClusterSecretStore": "Ready", "GatewayClass": "Accepted"}

// objectChecks: each cluster-scoped object the render names and does not create exists.
func objectChecks(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource) []Check {
	rendered := renderedKeys(objs)
	refs := map[string]*ref{}
	var defaultClass []string // claims without a storageClassName: the default StorageClass's
	add := func(gvr schema.GroupVersionResource, kind, name string, by *unstructured.Unstructured, fix string) {
		if name == "" || rendered[gvr.Group+"/"+kind+"/"+name] {
			return
		}
		k := kind + "/" + name
		if refs[k] == nil {
			refs[k] = &ref{gvr: gvr, kind: kind, name: name, fix: fix, condition: conditions[kind]}
		}
		who := by.GetKind() + " " + path.Join(by.GetNamespace(), by.GetName())
		if !slices.Contains(refs[k].by, who) && len(refs[k].by) < 3 {
			refs[k].by = append(refs[k].by, who)
		}
	}
	for _, o := range objs {
		switch gk := o.GroupVersionKind().GroupKind(); gk {
		case schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}:
			if k, _, _ := unstructured.NestedString(o.Object, "spec", "issuerRef", "kind"); k == "ClusterIssuer" {
				n, _, _ := unstructured.NestedString(o.Object, "spec", "issuerRef", "name")
				add(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"}, "ClusterIssuer", n, o,
					"create the cert-manager ClusterIssuer, or set the site's issuer (auditor site set issuer=NAME)")
			}
		case schema.GroupKind{Group: "external-secrets.io", Kind: "ExternalSecret"}:
			if k, _, _ := unstructured.NestedString(o.Object, "spec", "secretStoreRef", "kind"); k == "ClusterSecretStore" {
				n, _, _ := unstructured.NestedString(o.Object, "spec", "secretStoreRef", "name")
				add(schema.GroupVersionResource{Group: "external-secrets.io", Version: externalSecretsVersion(served), Resource: "clustersecretstores"}, "ClusterSecretStore", n, o,
					"create the External Secrets ClusterSecretStore, or set the site's store (auditor site set secretStore=NAME)")
			}
		case schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}:
			n, _, _ := unstructured.NestedString(o.Object, "spec", "gatewayClassName")
			add(schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}, "GatewayClass", n, o,
				"install a Gateway controller whose GatewayClass has this name, or rename gatewayClassName")
		case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
			n, set, _ := unstructured.NestedString(o.Object, "spec", "storageClassName")
			if !set {
				defaultClass = appendBy(defaultClass, o)
			}
			add(schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass", n, o,
				"create the StorageClass, or change storageClassName")
		case schema.GroupKind{Group: "postgresql.cnpg.io", Kind: "Cluster"}:
			n, set, _ := unstructured.NestedString(o.Object, "spec", "storage", "storageClass")
			if !set {
				defaultClass = appendBy(defaultClass, o)
			}
			add(schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass", n, o,
				"create the StorageClass, or change spec.storage.storageClass")
		}
		if claims, ok, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates"); ok {
			for _, c := range claims {
				cm, _ := c.(map[string]any)
				n, set, _ := unstructured.NestedString(cm, "spec", "storageClassName")
				if !set {
					defaultClass = appendBy(defaultClass, o)
				}
				add(schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass", n, o,
					"create the StorageClass, or change the claim template's storageClassName")
			}
		}
		if pod := manifest.PodSpec(o); pod != nil {
			n, _, _ := unstructured.NestedString(pod, "priorityClassName")
			if n != "system-cluster-critical" && n != "system-node-critical" {
				add(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}, "PriorityClass", n, o,
					"create the PriorityClass, or remove priorityClassName")
			}
		}
	}
	var out []Check
	for _, k := range slices.Sorted(maps.Keys(refs)) {
		out = append(out, refs[k].check(ctx, dyn, served))
	}
	if len(defaultClass) > 0 {
		out = append(out, defaultStorageClass(ctx, dyn, defaultClass))
	}
	return out
}

// renderedKeys is the group/kind/name of each of objs.
func renderedKeys(objs []*unstructured.Unstructured) map[string]bool {
	rendered := map[string]bool{}
	for _, o := range objs {
		rendered[o.GroupVersionKind().Group+"/"+o.GetKind()+"/"+o.GetName()] = true
	}
	return rendered
}

// check is the check of the object r names: its API served, the object there, and working
// when r has a condition that says so.
func (r *ref) check(ctx context.Context, dyn dynamic.Interface, served map[schema.GroupVersion]map[string]resource) Check {
	c := Check{Area: "object", Name: r.kind + " " + r.name, Detail: "named by " + strings.Join(r.by, ", ")}
	if _, ok := served[r.gvr.GroupVersion()][r.kind]; !ok {
		c.Detail = fmt.Sprintf("its API (%s) is not served; %s", r.gvr.GroupVersion(), c.Detail)
		c.Fix = "install " + operatorOf(r.gvr.Group) + ", then: " + r.fix
		return c
	}
	obj, err := dyn.Resource(r.gvr).Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case err == nil:
		c.OK = true
		if r.condition != "" {
			if ok, why := conditionTrue(obj, r.condition); !ok {
				c.OK = false
				c.Detail = fmt.Sprintf("exists but is not %s (%s); %s", r.condition, why, c.Detail)
				c.Fix = "see its controller's logs: what uses it stays unhealthy, and later sync waves wait"
			}
		}
	case apierrors.IsNotFound(err):
		c.Detail = "missing; " + c.Detail
		c.Fix = r.fix
	default:
		c.Error = true
		c.Detail = "cannot read it: " + err.Error()
		c.Fix = "let the kubeconfig's user get " + r.gvr.Resource
	}
	return c
}

// appendBy adds o to the list of the objects naming something, up to three.
func appendBy(by []string, o *unstructured.Unstructured) []string {
	who := o.GetKind() + " " + path.Join(o.GetNamespace(), o.GetName())
	if len(by) < 3 && !slices.Contains(by, who) {
		by = append(by, who)
	}
	return by
}

// conditionTrue says whether obj's status condition of type t is True, and if not, why.
func conditionTrue(obj *unstructured.Unstructured, t string) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != t {
			continue
		}
		if m["status"] == "True" {
			return true, ""
		}
		msg, _ := m["message"].(string)
		reason, _ := m["reason"].(string)
		return false, strings.TrimSpace(fmt.Sprintf("%s: %s %s", m["status"], reason, msg))
	}
	return false, "no " + t + " condition: no controller has looked at it"
}

// defaultStorageClass: claims that name no class need one marked as the cluster's default.
func defaultStorageClass(ctx context.Context, dyn dynamic.Interface, by []string) Check {
	c := Check{Area: "object", Name: "default StorageClass", Detail: "for the claims of " + strings.Join(by, ", ")}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.Error, c.Detail = true, "cannot list StorageClasses: "+err.Error()
		return c
	}
	for _, sc := range list.Items {
		if sc.GetAnnotations()["storageclass.kubernetes.io/is-default-class"] == "true" {
			c.OK = true
			c.Detail = sc.GetName() + " " + c.Detail
			return c
		}
	}
	c.Detail = "none is marked storageclass.kubernetes.io/is-default-class; " + c.Detail
	c.Fix = "mark one StorageClass as the default, or name a class in those claims: they stay Pending"
	return c
}

func externalSecretsVersion(served map[schema.GroupVersion]map[string]resource) string {
	for _, v := range []string{"v1", "v1beta1"} {
		if _, ok := served[schema.GroupVersion{Group: "external-secrets.io", Version: v}]["ClusterSecretStore"]; ok {
			return v
		}
	}
	return "v1"
}
