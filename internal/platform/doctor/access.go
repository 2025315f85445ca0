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
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/argoproj/argo-cd/v3/resource_customizations"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// healthChecks says how Argo CD assesses the health of each custom kind the render uses: a
// customization in argocd-cm (per key or in the resource.customizations block, globs included),
// the built-in Lua check of the Argo CD release the auditor is built with, or none (Healthy at
// once: later sync waves do not wait for it). Only an Application without a check fails: the
// app-of-apps waves then do not wait for each other (docs/platform.md).
func healthChecks(ctx context.Context, kube kubernetes.Interface, objs []*unstructured.Unstructured, ns string) []Check {
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "argocd-cm", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return []Check{{Area: "argocd", Name: "Argo CD health checks", OK: true, Skipped: true, Detail: "no argocd-cm in " + ns + ": Argo CD is not installed there yet"}}
	}
	if err != nil {
		return []Check{{Area: "argocd", Name: "Argo CD health checks", Error: true, Detail: "argocd-cm not readable in " + ns + ": " + err.Error()}}
	}
	custom := customizedHealth(cm.Data)
	seen := map[schema.GroupKind]bool{}
	var out []Check
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if seen[gk] || !strings.Contains(gk.Group, ".") || strings.HasSuffix(gk.Group, ".k8s.io") && gk.Group != "gateway.networking.k8s.io" && gk.Group != "inference.networking.k8s.io" {
			continue // core and built-in groups: Argo CD's Go health checks or none
		}
		seen[gk] = true
		c := Check{Area: "argocd", Name: "health of " + gk.Kind + "." + gk.Group, OK: true}
		if where := custom(gk); where != "" {
			c.Detail = "customized in argocd-cm (" + where + ")"
		} else if builtinHealth(gk) {
			c.Detail = "Argo CD's built-in check (of the release the auditor is built with)"
		} else {
			c.Detail = "no health check: Argo CD counts it Healthy at once"
			if gk == (schema.GroupKind{Group: "argoproj.io", Kind: "Application"}) {
				c.OK = false
				c.Detail += ": the app-of-apps' sync waves do not wait for each other"
				c.Fix = "add resource.customizations.health.argoproj.io_Application to argocd-cm (Argo CD's documentation, App of Apps)"
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// customizedHealth returns the argocd-cm entry that gives a kind a health check, "" for none:
// a key resource.customizations.health.<group>_<kind>, or an entry <group>/<kind> with a
// health.lua in the resource.customizations block; group and kind may be globs.
func customizedHealth(data map[string]string) func(schema.GroupKind) string {
	type entry struct{ group, kind, where string }
	var entries []entry
	const prefix = "resource.customizations.health."
	for k, v := range data {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		if i := strings.LastIndex(rest, "_"); i >= 0 {
			entries = append(entries, entry{rest[:i], rest[i+1:], k})
		}
	}
	var block map[string]map[string]any
	if err := yaml.Unmarshal([]byte(data["resource.customizations"]), &block); err == nil {
		for k, v := range block {
			if _, ok := v["health.lua"]; !ok {
				continue
			}
			group, kind, found := strings.Cut(k, "/")
			if !found {
				group, kind = "", k
			}
			entries = append(entries, entry{group, kind, "resource.customizations: " + k})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].where < entries[j].where })
	return func(gk schema.GroupKind) string {
		for _, e := range entries {
			if g, _ := path.Match(e.group, gk.Group); g {
				if k, _ := path.Match(e.kind, gk.Kind); k {
					return e.where
				}
			}
		}
		return ""
	}
}

// builtinHealth says whether Argo CD ships a Lua health check for gk: its folder, or a wildcard
// folder ("_.crossplane.io" stands for "*.crossplane.io").
func builtinHealth(gk schema.GroupKind) bool {
	if _, err := fs.Stat(resource_customizations.Embedded, path.Join(gk.Group, gk.Kind, "health.lua")); err == nil {
		return true
	}
	dirs, _ := fs.ReadDir(resource_customizations.Embedded, ".")
	for _, d := range dirs {
		suffix, ok := strings.CutPrefix(d.Name(), "_")
		if !ok || !strings.HasSuffix(gk.Group, suffix) {
			continue
		}
		if _, err := fs.Stat(resource_customizations.Embedded, path.Join(d.Name(), gk.Kind, "health.lua")); err == nil {
			return true
		}
		if _, err := fs.Stat(resource_customizations.Embedded, path.Join(d.Name(), "_", "health.lua")); err == nil {
			return true
		}
	}
	return false
}

// access is one permission the auditor needs.
type access struct {
	verb, group, resource, namespace, name string
}

func (a access) String() string {
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	what := path.Join(a.group, a.resource)
	if a.name != "" {
		what += "/" + a.name
	}
	return fmt.Sprintf("%s %s %s", a.verb, what, where)
}

// auditorChecks: the auditor's ServiceAccount, once synced, may do what the daemon does: list and
// watch every kind the env renders where it renders it, and the kinds it watches for objects
// made by hand (drift.DefaultExtraKinds) in each namespace of its config's watchNamespaces; get
// argocd-cm; hold its Leases.
func auditorChecks(ctx context.Context, kube kubernetes.Interface, objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource, sa, argocdNS string) []Check {
	ns, name, _ := strings.Cut(sa, "/")
	title := "auditor's access (" + sa + ")"
	_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return []Check{{Area: "auditor", Name: title, OK: true, Skipped: true, Detail: "ServiceAccount " + sa + " not there yet: the first sync creates it"}}
	}
	if err != nil {
		return []Check{{Area: "auditor", Name: title, Error: true, Detail: "ServiceAccount " + sa + " not readable: " + err.Error()}}
	}
	var needs []access
	add := func(a access) {
		if !slices.Contains(needs, a) {
			needs = append(needs, a)
		}
	}
	read := func(gvk schema.GroupVersionKind, namespace string) {
		r, ok := served[gvk.GroupVersion()][gvk.Kind]
		if !ok {
			return
		}
		if !r.namespaced {
			namespace = ""
		}
		for _, verb := range []string{"list", "watch"} {
			add(access{verb: verb, group: gvk.Group, resource: r.name, namespace: namespace})
		}
	}
	for _, o := range objs {
		read(o.GroupVersionKind(), o.GetNamespace())
	}
	cfg := auditorConfig(objs, ns)
	for _, watched := range cfg.WatchNamespaces {
		for _, gvk := range drift.DefaultExtraKinds {
			read(gvk, watched)
		}
	}
	add(access{verb: "get", resource: "configmaps", namespace: argocdNS, name: "argocd-cm"})
	if le := cfg.LeaderElection; le.Enabled {
		if le.Namespace == "" {
			le.Namespace = ns
		}
		add(access{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: le.Namespace})
		for _, verb := range []string{"get", "update"} {
			add(access{verb: verb, group: "coordination.k8s.io", resource: "leases", namespace: le.Namespace, name: le.Name})
		}
	}
	user := "system:serviceaccount:" + ns + ":" + name
	var denied []string
	for _, a := range needs {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: a.resource, Name: a.name,
			},
		}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return []Check{{Area: "auditor", Name: title, Error: true, Detail: "cannot ask the API server: " + err.Error(), Fix: "run doctor as a user who may create SubjectAccessReviews"}}
		}
		if !got.Status.Allowed {
			denied = append(denied, a.String())
		}
	}
	c := Check{Area: "auditor", Name: title, OK: len(denied) == 0, Detail: fmt.Sprintf("%d permissions checked", len(needs))}
	if !c.OK {
		shown := denied
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("%d more", len(denied)-5))
		}
		c.Detail = fmt.Sprintf("denied %d of %d: %s", len(denied), len(needs), strings.Join(shown, "; "))
		c.Fix = "grant them with charts/auditor's rbac values, base/auditor/values.yaml here (get, list and watch; its Leases in " + ns + ")"
	}
	return []Check{c}
}

// daemonConfig is what doctor reads of the auditor's config file.
type daemonConfig struct {
	WatchNamespaces []string `json:"watchNamespaces"`
	LeaderElection  struct {
		Enabled   bool   `json:"enabled"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"leaderElection"`
}

// auditorConfig reads the auditor's rendered config (ConfigMap auditor-config in ns, key
// config.yaml); empty when the env renders none.
func auditorConfig(objs []*unstructured.Unstructured, ns string) daemonConfig {
	var cfg daemonConfig
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "auditor-config" && o.GetNamespace() == ns {
			data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			_ = yaml.Unmarshal([]byte(data), &cfg) // a config the daemon rejects is its own check's
		}
	}
	return cfg
}
