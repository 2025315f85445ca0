package simulate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// fireCronJobs creates one Job from each CronJob's template, as `kubectl create job --from` does.
func fireCronJobs(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "CronJob" {
			continue
		}
		tpl, _, _ := unstructured.NestedMap(o.Object, "spec", "jobTemplate")
		var jt batchv1.JobTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tpl, &jt); err != nil {
			return fmt.Errorf("cronjob %s: %w", o.GetName(), err)
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: o.GetName() + "-sim", Namespace: o.GetNamespace(), Labels: jt.Labels}, Spec: jt.Spec}
		if _, err := cs.BatchV1().Jobs(o.GetNamespace()).Create(ctx, job, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("job from cronjob %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// settle plays the kubelet's part in pod deletion (a preempted pod fails and is removed at once) and waits
// until no pod changes node or state for opts.Settle. It returns the preempted pods.
func settle(ctx context.Context, cs kubernetes.Interface, opts Options) ([]string, error) {
	deadline := time.Now().Add(opts.Timeout)
	preempted := map[string]bool{}
	last, stableSince := "", time.Now()
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		var state []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				if p.Spec.NodeName != "" {
					preempted[p.Namespace+"/"+p.Name] = true
				}
				// The kubelet moves a pod it killed to a terminal phase before it goes: a Job with a
				// podFailurePolicy counts (or ignores) the pod, and lifts its tracking finalizer, only then.
				if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
					failed := p.DeepCopy()
					failed.Status.Phase = corev1.PodFailed
					_, _ = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, failed, metav1.UpdateOptions{})
				}
				zero := int64(0)
				_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				continue
			}
			state = append(state, p.Namespace+"/"+p.Name+"@"+p.Spec.NodeName+":"+scheduledReason(&p))
		}
		sort.Strings(state)
		cur := strings.Join(state, ",")
		if cur != last {
			last, stableSince = cur, time.Now()
		} else if len(state) > 0 && time.Since(stableSince) >= opts.Settle {
			out := make([]string, 0, len(preempted))
			for p := range preempted {
				out = append(out, p)
			}
			sort.Strings(out)
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("placement did not settle within %s", opts.Timeout)
}

func scheduledReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}
