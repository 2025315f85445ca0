package manifest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodTemplate returns the pod an object makes: a workload's pod template (metadata and spec)
// or a Pod itself; nil for other kinds. Deployments, StatefulSets, DaemonSets, ReplicaSets,
// Jobs and CronJobs are workloads.
func PodTemplate(o *unstructured.Unstructured) map[string]any {
	var path []string
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Pod"}:
		return o.Object
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "apps", Kind: "ReplicaSet"},
		schema.GroupKind{Group: "batch", Kind: "Job"}:
		path = []string{"spec", "template"}
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		path = []string{"spec", "jobTemplate", "spec", "template"}
	default:
		return nil
	}
	t, _, _ := unstructured.NestedMap(o.Object, path...)
	return t
}

// PodSpec returns the spec of the pod an object makes (PodTemplate's spec); nil for other kinds.
func PodSpec(o *unstructured.Unstructured) map[string]any {
	t := PodTemplate(o)
	if t == nil {
		return nil
	}
	spec, _, _ := unstructured.NestedMap(t, "spec")
	return spec
}
