package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// failed is a Failure in the making, with the pods there were before it (by UID).
type failed struct {
	Failure
	uids map[types.UID]bool
}

// failNodes takes nodes away: each Node is deleted, and the pods bound to it are deleted at once
// (what the pod garbage collector does to the pods of a Node that is gone).
func failNodes(ctx context.Context, cs kubernetes.Interface, names []string, ns []*corev1.Node) (*failed, error) {
	for _, name := range names {
		if !slices.ContainsFunc(ns, func(n *corev1.Node) bool { return n.Name == name }) {
			var all []string
			for _, n := range ns {
				all = append(all, n.Name)
			}
			return nil, fmt.Errorf("--fail-node %s: no such node (the nodes: %s)", name, strings.Join(all, ", "))
		}
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := &failed{Failure: Failure{Nodes: slices.Clone(names), Lost: []string{}, Replaced: []Placement{}}, uids: map[types.UID]bool{}}
	for _, p := range pods.Items {
		out.uids[p.UID] = true
	}
	for _, name := range names {
		if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("fail node %s: %w", name, err)
		}
	}
	zero := int64(0)
	for _, p := range pods.Items {
		if !slices.Contains(names, p.Spec.NodeName) {
			continue
		}
		if !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
			out.Lost = append(out.Lost, p.Namespace+"/"+p.Name) // a node agent goes with its node: nothing is lost
		}
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %s/%s of failed node %s: %w", p.Namespace, p.Name, p.Spec.NodeName, err)
		}
	}
	sort.Strings(out.Lost)
	return out, nil
}

func createNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	status, taints := n.Status, n.Spec.Taints
	got, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	got.Status = status
	got, err = cs.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("mark node %s ready: %w", n.Name, err)
	}
	// The API server taints every new node not-ready; the node lifecycle controller would lift it
	// once the kubelet reports Ready. Neither runs here, so the simulated kubelet lifts it.
	got.Spec.Taints = taints
	if _, err := cs.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("untaint node %s: %w", n.Name, err)
	}
	return nil
}

// createVolumes pre-binds a PersistentVolume to every claim the objects make (PVCs and
// StatefulSet volumeClaimTemplates), since no storage provisioner runs.
func createVolumes(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	type claim struct {
		ns, name string
		spec     map[string]any
	}
	var claims []claim
	for _, o := range objs {
		switch o.GetKind() {
		case "PersistentVolumeClaim":
			spec, _, _ := unstructured.NestedMap(o.Object, "spec")
			claims = append(claims, claim{o.GetNamespace(), o.GetName(), spec})
		case "StatefulSet":
			replicas, ok, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			if !ok {
				replicas = 1
			}
			tpls, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
			for _, t := range tpls {
				tm := t.(map[string]any)
				name, _, _ := unstructured.NestedString(tm, "metadata", "name")
				spec, _, _ := unstructured.NestedMap(tm, "spec")
				for i := range replicas {
					claims = append(claims, claim{o.GetNamespace(), fmt.Sprintf("%s-%s-%d", name, o.GetName(), i), spec})
				}
			}
		}
	}
	for _, c := range claims {
		var spec corev1.PersistentVolumeClaimSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.spec, &spec); err != nil {
			return fmt.Errorf("claim %s/%s: %w", c.ns, c.name, err)
		}
		size := spec.Resources.Requests[corev1.ResourceStorage]
		if size.IsZero() {
			size = resource.MustParse("1Gi")
		}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "sim-" + c.ns + "-" + c.name}, Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: spec.AccessModes,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/simulated/" + c.ns + "/" + c.name}},
			ClaimRef:               &corev1.ObjectReference{Namespace: c.ns, Name: c.name},
		}}
		if spec.StorageClassName != nil {
			pv.Spec.StorageClassName = *spec.StorageClassName
		}
		if len(pv.Spec.AccessModes) == 0 {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create volume for %s/%s: %w", c.ns, c.name, err)
		}
	}
	return nil
}
