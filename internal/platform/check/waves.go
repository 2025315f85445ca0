package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/manifest"
)

const (
	syncWaveAnnotation = "argocd.argoproj.io/sync-wave"
	hookAnnotation     = "argocd.argoproj.io/hook"
)

// objRef names an object one rendered object needs, and why (the field that refers to it).
type objRef struct {
	gk        schema.GroupKind
	namespace string // "" for cluster-scoped kinds
	name      string
	via       string
	// optional: the pod starts without it (optional: true on the volume, envFrom or key ref).
	optional bool
	// keys are the keys of a Secret or ConfigMap the pod reads one by one (a key ref, a volume's
	// items); empty when it reads them all.
	keys []string
}

func (r objRef) key() string { return r.gk.String() + "/" + r.namespace + "/" + r.name }

func objKey(o *unstructured.Unstructured) string {
	return o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// waveOrder checks that no object needs an object of a later Argo CD sync wave. Argo CD applies
// wave N+1 only once every object of wave N is healthy, and the health of many kinds waits for what
// they refer to (an HTTPRoute for its Gateway's status, a Deployment's pods for their claim,
// ConfigMap, ServiceAccount, PriorityClass): such an object in an earlier wave than what it needs
// never gets healthy, and a fresh cluster never finishes its first sync. The same wave is fine:
// Argo CD applies a whole wave before it waits, Namespaces first. Only objects of the same render
// count; a reference to an object the env does not render is not this rule's business.
// Resource hooks (argocd.argoproj.io/hook) run outside the waves of the sync phase and are skipped.
func waveOrder(objs []*unstructured.Unstructured) []Violation {
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[objKey(o)] = o
	}
	var out []Violation
	for _, o := range objs {
		if _, hook := o.GetAnnotations()[hookAnnotation]; hook {
			continue
		}
		w, err := syncWave(o)
		if err != nil {
			out = append(out, Violation{Rule: "sync-wave-order", Object: id(o), Message: err.Error()})
			continue
		}
		seen := map[string]bool{}
		for _, r := range needs(o) {
			dep, ok := byKey[r.key()]
			if !ok || seen[r.key()] || dep == o {
				continue
			}
			seen[r.key()] = true
			if _, hook := dep.GetAnnotations()[hookAnnotation]; hook {
				continue
			}
			dw, err := syncWave(dep)
			if err != nil || dw <= w {
				continue // an unparsable wave is reported on its own object
			}
			out = append(out, Violation{Rule: "sync-wave-order", Object: id(o), Message: fmt.Sprintf(
				"%s (sync wave %d) needs %s (sync wave %d, %s): Argo CD applies wave %d only after wave %d is healthy, so %s waits forever on a fresh cluster; put %s in wave %d or earlier",
				id(o), w, id(dep), dw, r.via, dw, w, id(o), id(dep), w)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out
}

// syncWave reads an object's sync wave; Argo CD's default is 0.
func syncWave(o *unstructured.Unstructured) (int, error) {
	v, ok := o.GetAnnotations()[syncWaveAnnotation]
	if !ok {
		return 0, nil
	}
	w, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("annotation %s=%q is not an integer: %w", syncWaveAnnotation, v, err)
	}
	return w, nil
}

// needs lists the objects o cannot become healthy without.
func needs(o *unstructured.Unstructured) []objRef {
	ns := o.GetNamespace()
	var out []objRef
	if ns != "" {
		out = append(out, objRef{gk: schema.GroupKind{Kind: "Namespace"}, name: ns, via: "its namespace"})
	}
	gk := o.GroupVersionKind().GroupKind()
	switch {
	case gk.Group == "gateway.networking.k8s.io" && strings.HasSuffix(gk.Kind, "Route"):
		out = append(out, routeRefs(o)...)
	case gk.Group == "keda.sh" && gk.Kind == "ScaledObject", gk.Group == "autoscaling" && gk.Kind == "HorizontalPodAutoscaler":
		out = append(out, scaleTargetRef(o)...)
		if gk.Group == "keda.sh" {
			out = append(out, kedaAuthRefs(o)...)
		}
	case gk.Group == "karpenter.sh" && gk.Kind == "NodePool":
		ref, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "spec", "nodeClassRef")
		if ref["name"] != "" {
			out = append(out, objRef{gk: schema.GroupKind{Group: ref["group"], Kind: ref["kind"]}, name: ref["name"], via: "its nodeClassRef"})
		}
	case gk == cnpgCluster:
		out = append(out, barmanStoreRefs(o)...)
	case gk.Group == "postgresql.cnpg.io" && (gk.Kind == "ScheduledBackup" || gk.Kind == "Database"):
		if name, _, _ := unstructured.NestedString(o.Object, "spec", "cluster", "name"); name != "" {
			out = append(out, objRef{gk: schema.GroupKind{Group: "postgresql.cnpg.io", Kind: "Cluster"}, namespace: ns, name: name, via: "its spec.cluster"})
		}
	}
	if pod := podTemplate(o); pod != nil {
		out = append(out, podRefs(pod, ns)...)
	}
	return out
}

// podTemplate returns a workload's pod spec, nil for other kinds (a Pod included).
func podTemplate(o *unstructured.Unstructured) map[string]any {
	if o.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Pod"}) {
		return nil
	}
	return manifest.PodSpec(o)
}

// podRefs lists what a pod needs to be created and started: its ServiceAccount and
// PriorityClass (admission rejects the pod without them), its claims, ConfigMaps and Secrets
// (volumes, envFrom, env valueFrom, image pull secrets). A StatefulSet's volumeClaimTemplates are
// not references: the controller creates those claims.
func podRefs(pod map[string]any, ns string) []objRef {
	core := func(kind, name, via string) objRef {
		return objRef{gk: schema.GroupKind{Kind: kind}, namespace: ns, name: name, via: via}
	}
	// opt is core for a reference that may say optional: true at path of m.
	opt := func(kind, name, via string, m map[string]any, path ...string) objRef {
		r := core(kind, name, via)
		r.optional, _, _ = unstructured.NestedBool(m, path...)
		return r
	}
	var out []objRef
	if sa, _, _ := unstructured.NestedString(pod, "serviceAccountName"); sa != "" {
		out = append(out, core("ServiceAccount", sa, "its pods' serviceAccountName"))
	}
	if pc, _, _ := unstructured.NestedString(pod, "priorityClassName"); pc != "" {
		out = append(out, objRef{gk: schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}, name: pc, via: "its pods' priorityClassName"})
	}
	ips, _, _ := unstructured.NestedSlice(pod, "imagePullSecrets")
	for _, s := range ips {
		if name, _, _ := unstructured.NestedString(asMap(s), "name"); name != "" {
			out = append(out, core("Secret", name, "its pods' imagePullSecrets"))
		}
	}
	vols, _, _ := unstructured.NestedSlice(pod, "volumes")
	for _, v := range vols {
		vm := asMap(v)
		vname, _, _ := unstructured.NestedString(vm, "name")
		via := fmt.Sprintf("volume %s", vname)
		if n, _, _ := unstructured.NestedString(vm, "persistentVolumeClaim", "claimName"); n != "" {
			out = append(out, core("PersistentVolumeClaim", n, via))
		}
		if n, _, _ := unstructured.NestedString(vm, "configMap", "name"); n != "" {
			out = append(out, withItems(opt("ConfigMap", n, via, vm, "configMap", "optional"), vm, "configMap"))
		}
		if n, _, _ := unstructured.NestedString(vm, "secret", "secretName"); n != "" {
			out = append(out, withItems(opt("Secret", n, via, vm, "secret", "optional"), vm, "secret"))
		}
		srcs, _, _ := unstructured.NestedSlice(vm, "projected", "sources")
		for _, s := range srcs {
			if n, _, _ := unstructured.NestedString(asMap(s), "configMap", "name"); n != "" {
				out = append(out, withItems(opt("ConfigMap", n, via, asMap(s), "configMap", "optional"), asMap(s), "configMap"))
			}
			if n, _, _ := unstructured.NestedString(asMap(s), "secret", "name"); n != "" {
				out = append(out, withItems(opt("Secret", n, via, asMap(s), "secret", "optional"), asMap(s), "secret"))
			}
		}
	}
	for _, field := range []string{"initContainers", "containers"} {
		cs, _, _ := unstructured.NestedSlice(pod, field)
		for _, c := range cs {
			cm := asMap(c)
			cname, _, _ := unstructured.NestedString(cm, "name")
			efs, _, _ := unstructured.NestedSlice(cm, "envFrom")
			for _, ef := range efs {
				if n, _, _ := unstructured.NestedString(asMap(ef), "configMapRef", "name"); n != "" {
					out = append(out, opt("ConfigMap", n, "envFrom of container "+cname, asMap(ef), "configMapRef", "optional"))
				}
				if n, _, _ := unstructured.NestedString(asMap(ef), "secretRef", "name"); n != "" {
					out = append(out, opt("Secret", n, "envFrom of container "+cname, asMap(ef), "secretRef", "optional"))
				}
			}
			out = append(out, envRefs(cm, cname, opt)...)
		}
	}
	return out
}

// envRefs is the ConfigMap and Secret keys the env of the container cm, named cname, takes its
// values from; opt makes a reference that may say optional: true.
func envRefs(cm map[string]any, cname string, opt func(kind, name, via string, m map[string]any, path ...string) objRef) []objRef {
	var out []objRef
	envs, _, _ := unstructured.NestedSlice(cm, "env")
	for _, e := range envs {
		em := asMap(e)
		ename, _, _ := unstructured.NestedString(em, "name")
		via := fmt.Sprintf("env %s of container %s", ename, cname)
		if n, _, _ := unstructured.NestedString(em, "valueFrom", "configMapKeyRef", "name"); n != "" {
			ref := opt("ConfigMap", n, via, em, "valueFrom", "configMapKeyRef", "optional")
			if k, _, _ := unstructured.NestedString(em, "valueFrom", "configMapKeyRef", "key"); k != "" {
				ref.keys = []string{k}
			}
			out = append(out, ref)
		}
		if n, _, _ := unstructured.NestedString(em, "valueFrom", "secretKeyRef", "name"); n != "" {
			ref := opt("Secret", n, via, em, "valueFrom", "secretKeyRef", "optional")
			if k, _, _ := unstructured.NestedString(em, "valueFrom", "secretKeyRef", "key"); k != "" {
				ref.keys = []string{k}
			}
			out = append(out, ref)
		}
	}
	return out
}

// withItems adds to r the keys a volume source (m[field]) projects by its items, if it names any.
func withItems(r objRef, m map[string]any, field string) objRef {
	items, _, _ := unstructured.NestedSlice(m, field, "items")
	for _, it := range items {
		if k, _, _ := unstructured.NestedString(asMap(it), "key"); k != "" {
			r.keys = append(r.keys, k)
		}
	}
	return r
}

// routeRefs lists a Gateway API route's parents (Argo CD's route health waits for the parent's
// status) and backends (a missing backend makes ResolvedRefs False: the route is Degraded).
func routeRefs(o *unstructured.Unstructured) []objRef {
	ns := o.GetNamespace()
	var out []objRef
	parents, _, _ := unstructured.NestedSlice(o.Object, "spec", "parentRefs")
	for _, p := range parents {
		out = append(out, gatewayRef(asMap(p), "gateway.networking.k8s.io", "Gateway", ns, "its parentRef"))
	}
	rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
	for _, r := range rules {
		backends, _, _ := unstructured.NestedSlice(asMap(r), "backendRefs")
		for _, b := range backends {
			out = append(out, gatewayRef(asMap(b), "", "Service", ns, "its backendRef"))
		}
	}
	return out
}

// gatewayRef reads a Gateway API reference (group, kind, namespace defaulted as the API does).
func gatewayRef(m map[string]any, group, kind, ns, via string) objRef {
	r := objRef{gk: schema.GroupKind{Group: group, Kind: kind}, namespace: ns, via: via}
	if g, ok := m["group"].(string); ok {
		r.gk.Group = g
	}
	if k, ok := m["kind"].(string); ok && k != "" {
		r.gk.Kind = k
	}
	if n, ok := m["namespace"].(string); ok && n != "" {
		r.namespace = n
	}
	r.name, _ = m["name"].(string)
	return r
}

// scaleTargetRef reads an HPA's or a ScaledObject's target (KEDA defaults to an apps/v1 Deployment).
func scaleTargetRef(o *unstructured.Unstructured) []objRef {
	ref, _, _ := unstructured.NestedStringMap(o.Object, "spec", "scaleTargetRef")
	if ref["name"] == "" {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref["apiVersion"])
	if err != nil || ref["apiVersion"] == "" {
		gv = schema.GroupVersion{Group: "apps", Version: "v1"}
	}
	kind := ref["kind"]
	if kind == "" {
		kind = "Deployment"
	}
	return []objRef{{gk: schema.GroupKind{Group: gv.Group, Kind: kind}, namespace: o.GetNamespace(), name: ref["name"], via: "its scaleTargetRef"}}
}

// kedaAuthRefs lists the (Cluster)TriggerAuthentications a ScaledObject's triggers use.
func kedaAuthRefs(o *unstructured.Unstructured) []objRef {
	var out []objRef
	triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
	for _, t := range triggers {
		ref, _, _ := unstructured.NestedStringMap(asMap(t), "authenticationRef")
		if ref["name"] == "" {
			continue
		}
		r := objRef{gk: schema.GroupKind{Group: "keda.sh", Kind: "TriggerAuthentication"}, namespace: o.GetNamespace(), name: ref["name"], via: "a trigger's authenticationRef"}
		if ref["kind"] == "ClusterTriggerAuthentication" {
			r.gk.Kind, r.namespace = "ClusterTriggerAuthentication", ""
		}
		out = append(out, r)
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
