package e2e

import (
	"context"
	"fmt"
	"testing"

	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestArgoCDSyncsProdOnKwokNodes is the stack's first promise: the real controller syncs prod from
// the fixture's Git repository at its head, every resource ends Synced, the vLLM pods run on the
// GPU pool's nodes, and every resource is Healthy — by its real controller, or by the test
// cluster's stated health for the kinds whose controllers do not run here.
func TestArgoCDSyncsProdOnKwokNodes(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	ctx := context.Background()
	// The comparison after the sync's last wave runs once more after the operation ends.
	var app *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		app = f.Application()
		status, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
		return status == "Synced", nil
	})
	require.NoError(t, err, "%s never Synced; OutOfSync: %v", f.App(), outOfSync(app))

	cs, err := cluster.Clientset()
	require.NoError(t, err)
	var pods *corev1.PodList
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err = cs.CoreV1().Pods(f.NS("inference")).List(ctx, metav1.ListOptions{LabelSelector: "platform.llm/component=vllm"})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "vLLM pods never all Running and Ready: %v", podPhases(pods))
	for _, p := range pods.Items {
		n, err := cs.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "gpu", n.Labels["platform.llm/pool"], "pod %s runs on %s", p.Name, n.Name)
	}

	// Health as Argo CD computes it, once the pods are up.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		h, _, _ := unstructured.NestedString(f.Application().Object, "status", "health", "status")
		return h == "Healthy", nil
	})
	resources, _, _ := unstructured.NestedSlice(f.Application().Object, "status", "resources")
	var unhealthy []string
	for _, r := range resources {
		m := r.(map[string]any)
		h, _, _ := unstructured.NestedString(m, "health", "status")
		msg, _, _ := unstructured.NestedString(m, "health", "message")
		gk := resourceName(m, false)
		if _, listed := testcluster.NotExercised[gk]; listed {
			assert.Equal(t, "Healthy", h, "%s's health is the test cluster's customization", gk)
			continue
		}
		if h != "" && h != "Healthy" {
			unhealthy = append(unhealthy, resourceName(m, true)+": "+h+" "+msg)
		}
	}
	assert.NoError(t, err, "application health: %v", unhealthy)
	assert.Empty(t, unhealthy)

	// The request path: a pool per model and the canary's, each Synced with the health the test
	// cluster declares for it, and their endpoint pickers running.
	var pools, objectives []string
	for _, r := range resources {
		m := r.(map[string]any)
		h, _, _ := unstructured.NestedString(m, "health", "status")
		switch resourceName(m, false) {
		case "inference.networking.k8s.io/InferencePool":
			pools = append(pools, fmt.Sprintf("%s %v %s", m["name"], m["status"], h))
		case "inference.networking.x-k8s.io/InferenceObjective":
			objectives = append(objectives, fmt.Sprintf("%s %v %s", m["name"], m["status"], h))
		}
	}
	assert.ElementsMatch(t, []string{"llama Synced Healthy", "qwen Synced Healthy", "qwen-canary Synced Healthy"}, pools)
	// Each model's priorities: interactive and batch (the canary takes no batch).
	assert.ElementsMatch(t, []string{"llama-batch Synced Healthy", "llama-interactive Synced Healthy",
		"qwen-batch Synced Healthy", "qwen-interactive Synced Healthy"}, objectives)
	pickers, err := cs.CoreV1().Pods(f.NS("inference")).List(ctx, metav1.ListOptions{LabelSelector: "platform.llm/component=endpoint-picker"})
	require.NoError(t, err)
	assert.Len(t, pickers.Items, 3, "%v", podPhases(pickers))
	for _, p := range pickers.Items {
		assert.True(t, p.Status.Phase == corev1.PodRunning && podReady(&p), "%s: %v", p.Name, podPhases(pickers))
	}
}

// resourceName names an entry of an Application's status.resources: group/kind, and with
// named also namespace/name.
func resourceName(m map[string]any, named bool) string {
	group, _, _ := unstructured.NestedString(m, "group")
	kind, _, _ := unstructured.NestedString(m, "kind")
	if !named {
		return group + "/" + kind
	}
	ns, _, _ := unstructured.NestedString(m, "namespace")
	name, _, _ := unstructured.NestedString(m, "name")
	return group + "/" + kind + " " + ns + "/" + name
}

// outOfSync lists the resources an Application's status calls OutOfSync.
func outOfSync(app *unstructured.Unstructured) []string {
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	var out []string
	for _, r := range resources {
		m := r.(map[string]any)
		if m["status"] == "OutOfSync" {
			out = append(out, resourceName(m, true))
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podPhases(pods *corev1.PodList) map[string]string {
	out := map[string]string{}
	if pods == nil {
		return out
	}
	for _, p := range pods.Items {
		out[p.Name] = string(p.Status.Phase) + " on " + p.Spec.NodeName
	}
	return out
}
