package check

import (
	"fmt"
	"regexp"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The Pod Security Admission labels of a namespace.
const (
	psaEnforce        = "pod-security.kubernetes.io/enforce"
	psaEnforceVersion = "pod-security.kubernetes.io/enforce-version"
)

// psaVersion is a pinned Pod Security version: a Kubernetes minor ("v1.37").
var psaVersion = regexp.MustCompile(`^v1\.\d+$`)

var networkPolicyGK = schema.GroupKind{Group: "networking.k8s.io", Kind: "NetworkPolicy"}

// NamespaceSecurity is what a platform namespace enforces, as rendered: the Pod Security level
// and version, whether a NetworkPolicy denies all traffic by default, and whether its pods may
// still resolve names.
type NamespaceSecurity struct {
	Namespace string `json:"namespace"`
	// PodSecurity is "level:version" from the enforce labels ("restricted:v1.37"); "" when unset.
	PodSecurity string `json:"podSecurity"`
	// DefaultDeny names the NetworkPolicy that selects every pod for ingress and egress and allows
	// nothing; "" when there is none.
	DefaultDeny string `json:"defaultDeny"`
	// DNS names a NetworkPolicy that lets every pod of the namespace reach port 53; "" when none.
	DNS string `json:"dns"`
}

// namespaceSecurity checks every namespace the env renders (the platform's namespaces: the
// overlays render each namespace they use) for the two things that close it:
//   - rule namespace-pod-security: Pod Security Admission enforces a level (label
//     pod-security.kubernetes.io/enforce: privileged, baseline or restricted) pinned to a
//     Kubernetes minor (enforce-version v1.N, not latest, which tightens with every upgrade).
//     A namespace that enforces privileged passes with a warning: it admits any pod.
//   - rule network-default-deny: a NetworkPolicy with an empty podSelector, policyTypes Ingress
//     and Egress and no rule, so only the flows other policies allow get through. Such a policy
//     also stops DNS: unless a policy lets every pod reach port 53, every Service name in the
//     namespace stops resolving, which fails the rule too.
func namespaceSecurity(objs []*unstructured.Unstructured) (posture []NamespaceSecurity, violations, warnings []Violation) {
	policies := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == networkPolicyGK {
			policies[o.GetNamespace()] = append(policies[o.GetNamespace()], o)
		}
	}
	for _, ns := range objs {
		if ns.GroupVersionKind().GroupKind() != (schema.GroupKind{Kind: "Namespace"}) {
			continue
		}
		s := NamespaceSecurity{Namespace: ns.GetName()}
		level, version := ns.GetLabels()[psaEnforce], ns.GetLabels()[psaEnforceVersion]
		switch {
		case level == "":
			violations = append(violations, Violation{Rule: "namespace-pod-security", Object: id(ns), Message: fmt.Sprintf(
				"%s has no label %s: Pod Security Admission admits any pod there, privileged ones included; set it to restricted (or baseline where a workload needs it) with %s pinned",
				id(ns), psaEnforce, psaEnforceVersion)})
		case level != "privileged" && level != "baseline" && level != "restricted":
			violations = append(violations, Violation{Rule: "namespace-pod-security", Object: id(ns), Message: fmt.Sprintf(
				"%s has %s: %q, which is not a Pod Security level (privileged, baseline, restricted): the API server rejects the namespace",
				id(ns), psaEnforce, level)})
		case !psaVersion.MatchString(version):
			what := fmt.Sprintf("%s: %q", psaEnforceVersion, version)
			if version == "" {
				what = "no " + psaEnforceVersion + " (it defaults to latest)"
			}
			violations = append(violations, Violation{Rule: "namespace-pod-security", Object: id(ns), Message: fmt.Sprintf(
				"%s enforces %s with %s: the rules then tighten with every Kubernetes upgrade and may reject pods that ran before; pin a Kubernetes minor (v1.N) and raise it deliberately",
				id(ns), level, what)})
		default:
			s.PodSecurity = level + ":" + version
			if level == "privileged" {
				warnings = append(warnings, Violation{Rule: "namespace-pod-security", Object: id(ns), Message: fmt.Sprintf(
					"%s enforces privileged: Pod Security admits any pod there (host paths, host namespaces, any capability); keep only the workloads that need it in it",
					id(ns))})
			}
		}
		for _, p := range policies[ns.GetName()] {
			if s.DefaultDeny == "" && denyAll(p) {
				s.DefaultDeny = p.GetName()
			}
			if s.DNS == "" && allowsDNS(p) {
				s.DNS = p.GetName()
			}
		}
		switch {
		case s.DefaultDeny == "":
			violations = append(violations, Violation{Rule: "network-default-deny", Object: id(ns), Message: fmt.Sprintf(
				"%s has no default-deny NetworkPolicy (podSelector {}, policyTypes [Ingress, Egress], no rules): every pod in it accepts connections from anywhere and connects anywhere",
				id(ns))})
		case s.DNS == "":
			violations = append(violations, Violation{Rule: "network-default-deny", Object: id(ns), Message: fmt.Sprintf(
				"%s: NetworkPolicy %s denies all egress and no policy lets every pod reach DNS (port 53, UDP and TCP): no Service name resolves in the namespace; allow egress to kube-dns for podSelector {}",
				id(ns), s.DefaultDeny)})
		}
		posture = append(posture, s)
	}
	sort.Slice(posture, func(i, j int) bool { return posture[i].Namespace < posture[j].Namespace })
	return posture, violations, warnings
}

// denyAll reports whether a NetworkPolicy selects every pod of its namespace for both directions
// and allows nothing.
func denyAll(p *unstructured.Unstructured) bool {
	if !selectsAll(p) {
		return false
	}
	types, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "policyTypes")
	ingress, _, _ := unstructured.NestedSlice(p.Object, "spec", "ingress")
	egress, _, _ := unstructured.NestedSlice(p.Object, "spec", "egress")
	return slices.Contains(types, "Ingress") && slices.Contains(types, "Egress") && len(ingress) == 0 && len(egress) == 0
}

// allowsDNS reports whether a NetworkPolicy lets every pod of its namespace send to port 53 over
// UDP (what resolvers use first). A rule without ports allows every port.
func allowsDNS(p *unstructured.Unstructured) bool {
	if !selectsAll(p) {
		return false
	}
	egress, _, _ := unstructured.NestedSlice(p.Object, "spec", "egress")
	for _, r := range egress {
		ports, _, _ := unstructured.NestedSlice(asMap(r), "ports")
		if len(ports) == 0 {
			return true
		}
		for _, port := range ports {
			pm := asMap(port)
			proto, _, _ := unstructured.NestedString(pm, "protocol")
			if (proto == "" || proto == "UDP") && portCovers(pm, 53) {
				return true
			}
		}
	}
	return false
}

// portCovers reports whether a NetworkPolicy port entry covers port n (no port: all of them).
func portCovers(pm map[string]any, n int64) bool {
	switch v := pm["port"].(type) {
	case nil:
		return true
	case int64:
		end, ok, _ := unstructured.NestedInt64(pm, "endPort")
		return v == n || ok && v <= n && n <= end
	case float64:
		return int64(v) == n
	case string:
		return v == "dns" || v == "dns-tcp" || v == fmt.Sprint(n)
	}
	return false
}

// selectsAll reports whether a NetworkPolicy's podSelector is empty (every pod).
func selectsAll(p *unstructured.Unstructured) bool {
	sel, found, _ := unstructured.NestedMap(p.Object, "spec", "podSelector")
	if !found {
		return true
	}
	labels, _, _ := unstructured.NestedMap(sel, "matchLabels")
	exprs, _, _ := unstructured.NestedSlice(sel, "matchExpressions")
	return len(labels) == 0 && len(exprs) == 0
}
