// Package doctor says what a cluster must have before Argo CD's first sync of an env, as
// `flux check --pre` does: every API the env's render uses served at the version it uses, the
// cluster-scoped objects it names but does not create (the certificate issuer, the secret store,
// the GatewayClass, StorageClasses, PriorityClasses), Argo CD's health assessment of each custom
// kind (the sync waves wait on it), and, once synced, the auditor's own read access. Each check
// is one line with the fix; a failed one makes the report fail.
package doctor

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argoproj/argo-cd/v3/resource_customizations"
)

// Check is one line of the report.
type Check struct {
	// Area groups the checks: api, object, argocd, auditor.
	Area string `json:"area"`
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Skipped is true when the check could not apply (OK is then true).
	Skipped bool   `json:"skipped,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Fix says what to do when the check failed.
	Fix string `json:"fix,omitempty"`
}

// Report is every check of one env against one cluster.
type Report struct {
	Env     string  `json:"env"`
	Server  string  `json:"server"`
	Version string  `json:"version"`
	Checks  []Check `json:"checks"`
	OK      bool    `json:"ok"`
}

// Options say where the auditor and Argo CD run.
type Options struct {
	// ArgoCDNamespace holds argocd-cm (default argocd).
	ArgoCDNamespace string
	// Auditor is the auditor's ServiceAccount as namespace/name (default llm-system/auditor).
	Auditor string
}

func (o *Options) defaults() {
	if o.ArgoCDNamespace == "" {
		o.ArgoCDNamespace = "argocd"
	}
	if o.Auditor == "" {
		o.Auditor = "llm-system/auditor"
	}
}

// operators name who installs a group's CRDs: what the fix of a missing API says.
var operators = map[string]string{
	"keda.sh":                   "KEDA",
	"karpenter.sh":              "Karpenter",
	"karpenter.k8s.aws":         "Karpenter's AWS provider",
	"postgresql.cnpg.io":        "CloudNativePG",
	"barmancloud.cnpg.io":       "CloudNativePG's Barman Cloud plugin",
	"cert-manager.io":           "cert-manager",
	"external-secrets.io":       "External Secrets Operator",
	"monitoring.coreos.com":     "kube-prometheus-stack (the Prometheus Operator)",
	"gateway.networking.k8s.io": "the Gateway API CRDs (with a Gateway controller)",
	"argoproj.io":               "Argo CD",
	"nvidia.com":                "NVIDIA's GPU Operator",
	"storage.k8s.io":            "a storage provisioner",
}

// Run checks the cluster cfg reaches against objs, the objects env deploys (its overlay, its
// other Applications, its Applications and projects).
func Run(ctx context.Context, cfg *rest.Config, env string, objs []*unstructured.Unstructured, opts Options) (*Report, error) {
	opts.defaults()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	ver, err := kube.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("cluster %s unreachable: %w", cfg.Host, err)
	}
	rep := &Report{Env: env, Server: cfg.Host, Version: ver.GitVersion}
	served, err := servedKinds(kube.Discovery())
	if err != nil {
		return nil, err
	}
	rep.Checks = append(rep.Checks, apiChecks(objs, served)...)
	rep.Checks = append(rep.Checks, objectChecks(ctx, dyn, objs, served)...)
	rep.Checks = append(rep.Checks, healthChecks(ctx, kube, objs, opts.ArgoCDNamespace)...)
	rep.Checks = append(rep.Checks, auditorChecks(ctx, kube, objs, served, opts.Auditor)...)
	rep.OK = true
	for _, c := range rep.Checks {
		rep.OK = rep.OK && c.OK
	}
	return rep, nil
}

// resource is a served kind: its plural name and whether it is namespaced.
type resource struct {
	name       string
	namespaced bool
}

// servedKinds maps each served group/version to its kinds.
func servedKinds(d discovery.DiscoveryInterface) (map[schema.GroupVersion]map[string]resource, error) {
	_, lists, err := d.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discover the cluster's APIs: %w", err)
	}
	out := map[schema.GroupVersion]map[string]resource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource
			}
			if out[gv] == nil {
				out[gv] = map[string]resource{}
			}
			out[gv][r.Kind] = resource{name: r.Name, namespaced: r.Namespaced}
		}
	}
	return out, nil
}

// apiChecks: every group the render uses is served with each of its kinds at the version used;
// one line per group.
func apiChecks(objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource) []Check {
	byGroup := map[string][]schema.GroupVersionKind{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if !slices.Contains(byGroup[gvk.Group], gvk) {
			byGroup[gvk.Group] = append(byGroup[gvk.Group], gvk)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var out []Check
	for _, g := range groups {
		gvks := byGroup[g]
		sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
		var missing, kinds []string
		for _, gvk := range gvks {
			name := gvk.Version + " " + gvk.Kind
			kinds = append(kinds, name)
			if _, ok := served[gvk.GroupVersion()][gvk.Kind]; !ok {
				missing = append(missing, name)
			}
		}
		label := g
		if label == "" {
			label = "core"
		}
		c := Check{Area: "api", Name: "API " + label, OK: len(missing) == 0, Detail: strings.Join(kinds, ", ")}
		if !c.OK {
			c.Detail = "not served: " + strings.Join(missing, ", ")
			c.Fix = fmt.Sprintf("install %s (its CRDs at a release serving %s) before the first sync", operatorOf(g), strings.Join(missing, ", "))
		}
		out = append(out, c)
	}
	return out
}

func operatorOf(group string) string {
	if who := operators[group]; who != "" {
		return who
	}
	return "the operator that owns " + group
}

// ref is a cluster-scoped object the render names without creating it.
type ref struct {
	gvr        schema.GroupVersionResource
	kind, name string
	by         []string // the objects naming it
	fix        string
}

// objectChecks: each cluster-scoped object the render names and does not create exists.
func objectChecks(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource) []Check {
	rendered := map[string]bool{}
	for _, o := range objs {
		rendered[o.GetKind()+"/"+o.GetName()] = true
	}
	refs := map[string]*ref{}
	add := func(gvr schema.GroupVersionResource, kind, name string, by *unstructured.Unstructured, fix string) {
		if name == "" || rendered[kind+"/"+name] {
			return
		}
		k := kind + "/" + name
		if refs[k] == nil {
			refs[k] = &ref{gvr: gvr, kind: kind, name: name, fix: fix}
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
			n, _, _ := unstructured.NestedString(o.Object, "spec", "storageClassName")
			add(schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass", n, o,
				"create the StorageClass, or change storageClassName")
		case schema.GroupKind{Group: "postgresql.cnpg.io", Kind: "Cluster"}:
			n, _, _ := unstructured.NestedString(o.Object, "spec", "storage", "storageClass")
			add(schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass", n, o,
				"create the StorageClass, or change spec.storage.storageClass")
		}
		if claims, ok, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates"); ok {
			for _, c := range claims {
				cm, _ := c.(map[string]any)
				n, _, _ := unstructured.NestedString(cm, "spec", "storageClassName")
				add(schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass", n, o,
					"create the StorageClass, or change the claim template's storageClassName")
			}
		}
		if pod := podSpec(o); pod != nil {
			n, _, _ := unstructured.NestedString(pod, "priorityClassName")
			if n != "system-cluster-critical" && n != "system-node-critical" {
				add(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}, "PriorityClass", n, o,
					"create the PriorityClass, or remove priorityClassName")
			}
		}
	}
	keys := make([]string, 0, len(refs))
	for k := range refs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Check
	for _, k := range keys {
		r := refs[k]
		c := Check{Area: "object", Name: r.kind + " " + r.name, Detail: "named by " + strings.Join(r.by, ", ")}
		if _, ok := served[r.gvr.GroupVersion()][r.kind]; !ok {
			c.Detail = fmt.Sprintf("its API (%s) is not served; %s", r.gvr.GroupVersion(), c.Detail)
			c.Fix = "install " + operatorOf(r.gvr.Group) + ", then: " + r.fix
			out = append(out, c)
			continue
		}
		_, err := dyn.Resource(r.gvr).Get(ctx, r.name, metav1.GetOptions{})
		switch {
		case err == nil:
			c.OK = true
		case apierrors.IsNotFound(err):
			c.Detail = "missing; " + c.Detail
			c.Fix = r.fix
		default:
			c.Detail = "cannot read it: " + err.Error()
			c.Fix = "let the kubeconfig's user get " + r.gvr.Resource
		}
		out = append(out, c)
	}
	return out
}

func externalSecretsVersion(served map[schema.GroupVersion]map[string]resource) string {
	for _, v := range []string{"v1", "v1beta1"} {
		if _, ok := served[schema.GroupVersion{Group: "external-secrets.io", Version: v}]["ClusterSecretStore"]; ok {
			return v
		}
	}
	return "v1"
}

// podSpec is a workload's pod spec, nil for other kinds.
func podSpec(o *unstructured.Unstructured) map[string]any {
	var p []string
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Pod"}:
		p = []string{"spec"}
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "batch", Kind: "Job"}:
		p = []string{"spec", "template", "spec"}
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		p = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	default:
		return nil
	}
	m, _, _ := unstructured.NestedMap(o.Object, p...)
	return m
}

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
