package render

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

const (
	psaEnforce        = "pod-security.kubernetes.io/enforce"
	psaEnforceVersion = "pod-security.kubernetes.io/enforce-version"
)

// TestPodSecurityAdmitsRenderedPods proves that the Pod Security labels the overlays give their
// namespaces and the securityContexts of their workloads agree, on the real API server. Pod
// Security Admission enforces on Pods only (for a Deployment or CronJob it merely warns), so each
// workload's pod template is created as a Pod, server-side dry-run, in its rendered namespace:
// every one must be admitted. First, in every namespace that enforces a level, a pod breaking
// that level must be rejected: that proves the enforcement is live (and that the API server sees
// the labels, which would otherwise make the admissions pass vacuously).
func TestPodSecurityAdmitsRenderedPods(t *testing.T) {
	testcluster.Need(t)
	syncer, err := testcluster.NewSyncer(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := cluster.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			res := renderRepo(t, env)
			if err := syncer.Sync(ctx, "llm-"+env, res.Objects, false); err != nil {
				t.Fatalf("%s rejected by the API server: %v", env, err)
			}
			levels := map[string]string{} // namespace -> "level:version" it enforces
			var pods []*unstructured.Unstructured
			for _, o := range res.Objects {
				if o.GetKind() == "Namespace" {
					if l := o.GetLabels()[psaEnforce]; l != "" {
						levels[o.GetName()] = l + ":" + o.GetLabels()[psaEnforceVersion]
					}
				}
				if p := podOf(o); p != nil {
					pods = append(pods, p)
				}
			}
			if len(levels) == 0 || len(pods) == 0 {
				t.Fatalf("%d namespaces enforce a level, %d pods", len(levels), len(pods))
			}
			waitAdmissible(t, dyn, levels)
			for ns, level := range levels {
				bad := breaking(level, pods, ns)
				if bad == nil {
					continue // privileged: nothing to break
				}
				want := fmt.Sprintf("violates PodSecurity %q", level)
				err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
					err := dryRunCreate(ctx, dyn, bad)
					return err != nil && strings.Contains(err.Error(), want), nil
				})
				if err != nil {
					t.Errorf("%s enforces %s, but pod %s breaking it is not rejected with %s: %v", ns, level, bad.GetName(), want, dryRunCreate(ctx, dyn, bad))
				}
			}
			admitted := 0
			for _, p := range pods {
				if err := dryRunCreate(ctx, dyn, p); err != nil {
					t.Errorf("%s: the pod of %s is rejected in %s (%s): %v", env, p.GetAnnotations()["test/workload"], p.GetNamespace(), levels[p.GetNamespace()], err)
					continue
				}
				admitted++
			}
			t.Logf("%d of %d workload pods admitted; namespaces enforce %v", admitted, len(pods), levels)
		})
	}
}

// breaking returns a pod of ns changed to break level ("restricted:v1.37"): for restricted, a
// workload's pod with every securityContext removed; for baseline, one with a privileged
// container. Nil for privileged, or when ns has no workload.
func breaking(level string, pods []*unstructured.Unstructured, ns string) *unstructured.Unstructured {
	name, _, _ := strings.Cut(level, ":")
	for _, p := range pods {
		if p.GetNamespace() != ns {
			continue
		}
		bad := p.DeepCopy()
		bad.SetName(p.GetName() + "-breaks-" + name)
		cs, _, _ := unstructured.NestedSlice(bad.Object, "spec", "containers")
		switch name {
		case "restricted":
			unstructured.RemoveNestedField(bad.Object, "spec", "securityContext")
			for _, c := range cs {
				delete(c.(map[string]any), "securityContext")
			}
		case "baseline":
			cs[0].(map[string]any)["securityContext"] = map[string]any{"privileged": true}
		default:
			return nil
		}
		_ = unstructured.SetNestedSlice(bad.Object, cs, "spec", "containers")
		return bad
	}
	return nil
}

// podOf makes the Pod a workload's controller would create from its template (nil for other
// kinds), with a claim volume for each of a StatefulSet's volumeClaimTemplates.
func podOf(o *unstructured.Unstructured) *unstructured.Unstructured {
	tpl := podTemplate(o)
	if tpl == nil {
		return nil
	}
	spec, _, _ := unstructured.NestedMap(tpl, "spec")
	labels, _, _ := unstructured.NestedStringMap(tpl, "metadata", "labels")
	vcts, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
	for _, v := range vcts {
		claim, _, _ := unstructured.NestedString(v.(map[string]any), "metadata", "name")
		vols, _, _ := unstructured.NestedSlice(spec, "volumes")
		vols = append(vols, map[string]any{"name": claim, "persistentVolumeClaim": map[string]any{"claimName": claim + "-" + o.GetName() + "-0"}})
		spec["volumes"] = vols
	}
	p := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": spec}}
	p.SetName(strings.ToLower(o.GetKind()) + "-" + o.GetName())
	p.SetNamespace(o.GetNamespace())
	p.SetLabels(labels)
	p.SetAnnotations(map[string]string{"test/workload": id(o)})
	return p
}

func dryRunCreate(ctx context.Context, dyn dynamic.Interface, p *unstructured.Unstructured) error {
	_, err := dyn.Resource(podsGVR).Namespace(p.GetNamespace()).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// waitAdmissible waits until pods can be created at all in the namespaces: their default
// ServiceAccount exists and their ResourceQuotas have a status (kube-controller-manager makes
// both; before, admission rejects every pod for reasons that are not Pod Security's).
func waitAdmissible(t *testing.T, dyn dynamic.Interface, namespaces map[string]string) {
	t.Helper()
	sas := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	quotas := schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}
	for ns := range namespaces {
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if _, err := dyn.Resource(sas).Namespace(ns).Get(ctx, "default", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return false, nil
			}
			list, err := dyn.Resource(quotas).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, q := range list.Items {
				if hard, _, _ := unstructured.NestedMap(q.Object, "status", "hard"); len(hard) == 0 {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("namespace %s: no default ServiceAccount or quota status after 30s (is kube-controller-manager running?)", ns)
		}
	}
}
