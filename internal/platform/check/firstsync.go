package check

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// firstSyncSplits checks that a weighted route split sends nothing to a workload before it is
// ready: a route rule with two or more backends and a nonzero weight to a Service whose pods come
// from a Deployment or StatefulSet of the route's own sync wave (or a later one) sends that share to
// pods still loading (a canary's cold start) the moment Argo CD applies the wave. In a later wave
// than the workload, the route waits for the workload's health: its pods ready. A route with one
// backend has no share to misplace: the Service has no endpoints until its pods are ready.
func firstSyncSplits(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if gk.Group != "gateway.networking.k8s.io" || !strings.HasSuffix(gk.Kind, "Route") {
			continue
		}
		if _, hook := o.GetAnnotations()[hookAnnotation]; hook {
			continue
		}
		w, err := syncWave(o)
		if err != nil {
			continue // reported by sync-wave-order
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
		for _, r := range rules {
			backends, _, _ := unstructured.NestedSlice(asMap(r), "backendRefs")
			if len(backends) < 2 {
				continue
			}
			for _, b := range backends {
				bm := asMap(b)
				weight, found, _ := unstructured.NestedInt64(bm, "weight")
				if found && weight == 0 {
					continue // the API's default weight is 1
				}
				if !found {
					weight = 1
				}
				ref := gatewayRef(bm, "", "Service", o.GetNamespace(), "its backendRef")
				for _, wl := range append(serviceWorkloads(ref, objs), refPoolWorkloads(ref, objs)...) {
					ww, err := syncWave(wl)
					if err != nil || ww < w {
						continue
					}
					out = append(out, Violation{Rule: "first-sync", Object: id(o), Message: fmt.Sprintf(
						"%s (sync wave %d) sends weight %d to %s %s/%s, whose pods come from %s (sync wave %d): Argo CD applies the split before those pods are ready, so their share of requests meets a cold start; put %s in wave %d or later",
						id(o), w, weight, ref.gk.Kind, ref.namespace, ref.name, id(wl), ww, id(o), ww+1)})
				}
			}
		}
	}
	return sortViolations(out)
}

// serviceWorkloads returns the Deployments and StatefulSets whose pods the Service ref selects.
func serviceWorkloads(ref objRef, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if ref.gk != (schema.GroupKind{Kind: "Service"}) {
		return nil
	}
	var sel map[string]string
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GroupVersionKind().Group == "" && o.GetNamespace() == ref.namespace && o.GetName() == ref.name {
			sel, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector")
		}
	}
	if len(sel) == 0 {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		default:
			continue
		}
		if o.GetNamespace() != ref.namespace {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		matches := true
		for k, v := range sel {
			if podLabels[k] != v {
				matches = false
				break
			}
		}
		if matches {
			out = append(out, o)
		}
	}
	return out
}

// refPoolWorkloads are the workloads whose pods the InferencePool ref names selects.
func refPoolWorkloads(ref objRef, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if ref.gk != inferencePoolGK {
		return nil
	}
	for _, p := range objects(objs, inferencePoolGK) {
		if p.GetNamespace() == ref.namespace && p.GetName() == ref.name {
			return poolWorkloads(p, objs, false)
		}
	}
	return nil
}
