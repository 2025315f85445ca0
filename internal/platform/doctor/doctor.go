// Package doctor says what a cluster must have before Argo CD's first sync of an env, as
// `flux check --pre` does: every API the env's render uses served at the version it uses, the
// cluster-scoped objects it names but does not create (the certificate issuer, the secret store,
// the GatewayClass, StorageClasses, PriorityClasses) and a Prometheus that selects its monitors
// and rules, Argo CD's health assessment of each custom
// kind (the sync waves wait on it), and, once synced, the auditor's own read access. Each check
// is one line with the fix; a failed one makes the report fail.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Check is one line of the report.
type Check struct {
	// Area groups the checks: api, object, argocd, auditor.
	Area string `json:"area"`
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Skipped is true when the check could not apply (OK is then true).
	Skipped bool `json:"skipped,omitempty"`
	// Error is true when the cluster could not be asked (OK is then false): no verdict.
	Error  bool   `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Fix says what to do when the check failed.
	Fix string `json:"fix,omitempty"`
}

// Report is every check of one env against one cluster.
type Report struct {
	Env     string  `json:"env"`
	Server  string  `json:"server"`
	Version string  `json:"version"`
	Checks  []Check `json:"checks"`
	// OK is true when every check passed; Errors counts those that could not be made.
	OK     bool `json:"ok"`
	Errors int  `json:"errors,omitempty"`
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
	"keda.sh":                       "KEDA",
	"karpenter.sh":                  "Karpenter",
	"karpenter.k8s.aws":             "Karpenter's AWS provider",
	"postgresql.cnpg.io":            "CloudNativePG",
	"barmancloud.cnpg.io":           "CloudNativePG's Barman Cloud plugin",
	"cert-manager.io":               "cert-manager",
	"external-secrets.io":           "External Secrets Operator",
	"monitoring.coreos.com":         "kube-prometheus-stack (the Prometheus Operator)",
	"gateway.networking.k8s.io":     "the Gateway API CRDs (with a Gateway controller)",
	"inference.networking.k8s.io":   "the Gateway API Inference Extension's CRDs (config/crd/bases of sigs.k8s.io/gateway-api-inference-extension v1.6.2), with a Gateway that supports InferencePool",
	"inference.networking.x-k8s.io": "the InferenceObjective CRD the endpoint picker v1.5.0 reads (config/crd/bases of sigs.k8s.io/gateway-api-inference-extension v1.5.0)",
	"argoproj.io":                   "Argo CD",
	"nvidia.com":                    "NVIDIA's GPU Operator",
	"storage.k8s.io":                "a storage provisioner",
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
	served, failedGroups, err := servedKinds(kube.Discovery())
	if err != nil {
		return nil, err
	}
	rep.Checks = append(rep.Checks, apiChecks(objs, served, failedGroups)...)
	rep.Checks = append(rep.Checks, objectChecks(ctx, dyn, objs, served)...)
	rep.Checks = append(rep.Checks, prometheusChecks(ctx, dyn, objs, served)...)
	rep.Checks = append(rep.Checks, inferenceChecks(ctx, dyn, objs, served)...)
	rep.Checks = append(rep.Checks, poolStatusChecks(ctx, dyn, objs, served)...)
	rep.Checks = append(rep.Checks, healthChecks(ctx, kube, objs, opts.ArgoCDNamespace)...)
	rep.Checks = append(rep.Checks, auditorChecks(ctx, kube, objs, served, opts.Auditor, opts.ArgoCDNamespace)...)
	rep.OK = true
	for _, c := range rep.Checks {
		rep.OK = rep.OK && c.OK
		if c.Error {
			rep.Errors++
		}
	}
	return rep, nil
}

// resource is a served kind: its plural name and whether it is namespaced.
type resource struct {
	name       string
	namespaced bool
}

// servedKinds maps each served group/version to its kinds; failed are the group/versions whose
// discovery failed (an aggregated API whose server is down), with the error.
func servedKinds(d discovery.DiscoveryInterface) (map[schema.GroupVersion]map[string]resource, map[schema.GroupVersion]error, error) {
	_, lists, err := d.ServerGroupsAndResources()
	failed := map[schema.GroupVersion]error{}
	var gdf *discovery.ErrGroupDiscoveryFailed
	switch {
	case errors.As(err, &gdf):
		maps.Copy(failed, gdf.Groups)
	case err != nil:
		return nil, nil, fmt.Errorf("discover the cluster's APIs: %w", err)
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
	return out, failed, nil
}

// apiChecks: every group the render uses is served with each of its kinds at the version used;
// one line per group.
func apiChecks(objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource, failed map[schema.GroupVersion]error) []Check {
	byGroup := map[string][]schema.GroupVersionKind{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if !slices.Contains(byGroup[gvk.Group], gvk) {
			byGroup[gvk.Group] = append(byGroup[gvk.Group], gvk)
		}
	}
	var out []Check
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		gvks := byGroup[g]
		sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
		var missing, kinds, unknown []string
		for _, gvk := range gvks {
			name := gvk.Version + " " + gvk.Kind
			kinds = append(kinds, name)
			if err := failed[gvk.GroupVersion()]; err != nil {
				unknown = append(unknown, fmt.Sprintf("%s (%v)", gvk.GroupVersion(), err))
			} else if _, ok := served[gvk.GroupVersion()][gvk.Kind]; !ok {
				missing = append(missing, name)
			}
		}
		label := g
		if label == "" {
			label = "core"
		}
		c := Check{Area: "api", Name: "API " + label, OK: len(missing) == 0 && len(unknown) == 0, Detail: strings.Join(kinds, ", ")}
		switch {
		case len(unknown) > 0:
			c.Error = true
			c.Detail = "discovery failed: " + strings.Join(slices.Compact(unknown), "; ")
			c.Fix = "make the API server's aggregated APIs available (kubectl get apiservices), then run doctor again"
		case !c.OK:
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
