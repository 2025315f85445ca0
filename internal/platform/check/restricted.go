package check

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/manifest"
)

// restrictedVolumes are the volume types the Pod Security level restricted allows.
var restrictedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}

// restrictedPods checks every container of every workload in a namespace that enforces the Pod
// Security level restricted (as the env renders the namespace) against what that level asks:
// runAsNonRoot true and no runAsUser 0 (pod or container), allowPrivilegeEscalation false,
// capabilities dropping ALL and adding nothing but NET_BIND_SERVICE, seccomp RuntimeDefault or
// Localhost (pod or container), not privileged, no host ports; and of the pod, no host
// namespaces and only the allowed volume types. The API server refuses such pods, but only pods:
// a Deployment or CronJob whose pods break the level is admitted with a warning, and its
// controller then fails to create any pod. Rule pod-security-restricted; one violation per
// container (and one per pod-level problem), naming the object and the container.
// Pods made by operators from other kinds (CloudNativePG's instances) are the operator's: not
// checked here.
func restrictedPods(objs []*unstructured.Unstructured) []Violation {
	restricted := map[string]bool{}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) && o.GetLabels()[psaEnforce] == "restricted" {
			restricted[o.GetName()] = true
		}
	}
	var out []Violation
	for _, o := range objs {
		pod := podSpec(o)
		if pod == nil || !restricted[o.GetNamespace()] {
			continue
		}
		add := func(what string, problems []string) {
			out = append(out, Violation{Rule: "pod-security-restricted", Object: id(o), Message: fmt.Sprintf(
				"%s %s breaks Pod Security restricted, which namespace %s enforces (the API server will refuse its pods): %s",
				id(o), what, o.GetNamespace(), strings.Join(problems, "; "))})
		}
		if problems := podProblems(pod); len(problems) > 0 {
			add("pod", problems)
		}
		podCtx, _, _ := unstructured.NestedMap(pod, "securityContext")
		for _, field := range []string{"initContainers", "containers"} {
			cs, _, _ := unstructured.NestedSlice(pod, field)
			for _, c := range cs {
				cm := asMap(c)
				name, _, _ := unstructured.NestedString(cm, "name")
				if problems := containerProblems(podCtx, cm); len(problems) > 0 {
					add("container "+name, problems)
				}
			}
		}
	}
	return out
}

// podProblems lists what a pod spec breaks of restricted outside its containers.
func podProblems(pod map[string]any) []string {
	var out []string
	for _, host := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if v, _, _ := unstructured.NestedBool(pod, host); v {
			out = append(out, host+" is true")
		}
	}
	vols, _, _ := unstructured.NestedSlice(pod, "volumes")
	for _, v := range vols {
		vm := asMap(v)
		for k := range vm {
			if k != "name" && !slices.Contains(restrictedVolumes, k) {
				name, _, _ := unstructured.NestedString(vm, "name")
				out = append(out, fmt.Sprintf("volume %s is of type %s (allowed: %s)", name, k, strings.Join(restrictedVolumes, ", ")))
			}
		}
	}
	return out
}

// containerProblems lists what one container breaks of restricted, its pod's securityContext
// supplying runAsNonRoot, runAsUser and seccompProfile where the container leaves them unset.
func containerProblems(podCtx, c map[string]any) []string {
	ctx, _, _ := unstructured.NestedMap(c, "securityContext")
	var out []string
	if v, _, _ := unstructured.NestedBool(ctx, "privileged"); v {
		out = append(out, "securityContext.privileged is true")
	}
	if v, ok, _ := unstructured.NestedBool(ctx, "allowPrivilegeEscalation"); !ok || v {
		out = append(out, "securityContext.allowPrivilegeEscalation is not false")
	}
	drop, _, _ := unstructured.NestedStringSlice(ctx, "capabilities", "drop")
	if !slices.Contains(drop, "ALL") {
		out = append(out, `securityContext.capabilities.drop does not include "ALL"`)
	}
	added, _, _ := unstructured.NestedStringSlice(ctx, "capabilities", "add")
	for _, c := range added {
		if c != "NET_BIND_SERVICE" {
			out = append(out, fmt.Sprintf("securityContext.capabilities.add has %s (only NET_BIND_SERVICE is allowed)", c))
		}
	}
	if v, ok := effectiveBool(podCtx, ctx, "runAsNonRoot"); !ok || !v {
		out = append(out, "runAsNonRoot is not true (set it in the pod's or the container's securityContext)")
	}
	if uid, ok := effectiveInt(podCtx, ctx, "runAsUser"); ok && uid == 0 {
		out = append(out, "runAsUser is 0 (root)")
	}
	if t := effectiveSeccomp(podCtx, ctx); t != "RuntimeDefault" && t != "Localhost" {
		if t == "" {
			t = "unset"
		}
		out = append(out, fmt.Sprintf("seccompProfile.type is %s (want RuntimeDefault or Localhost, in the pod's or the container's securityContext)", t))
	}
	ports, _, _ := unstructured.NestedSlice(c, "ports")
	for _, p := range ports {
		if hp, _, _ := unstructured.NestedInt64(asMap(p), "hostPort"); hp != 0 {
			out = append(out, fmt.Sprintf("hostPort %d is set", hp))
		}
	}
	return out
}

// effectiveBool is a securityContext field of the container, else of the pod.
func effectiveBool(podCtx, ctx map[string]any, field string) (bool, bool) {
	if v, ok, _ := unstructured.NestedBool(ctx, field); ok {
		return v, true
	}
	v, ok, _ := unstructured.NestedBool(podCtx, field)
	return v, ok
}

// effectiveInt is effectiveBool for integer fields.
func effectiveInt(podCtx, ctx map[string]any, field string) (int64, bool) {
	if v, ok, _ := unstructured.NestedInt64(ctx, field); ok {
		return v, true
	}
	v, ok, _ := unstructured.NestedInt64(podCtx, field)
	return v, ok
}

// effectiveSeccomp is the seccompProfile type of the container, else of the pod ("" when unset).
func effectiveSeccomp(podCtx, ctx map[string]any) string {
	if t, ok, _ := unstructured.NestedString(ctx, "seccompProfile", "type"); ok {
		return t
	}
	t, _, _ := unstructured.NestedString(podCtx, "seccompProfile", "type")
	return t
}

// podSpec returns the pod spec of a workload or of a Pod, nil for other kinds.
func podSpec(o *unstructured.Unstructured) map[string]any { return manifest.PodSpec(o) }
