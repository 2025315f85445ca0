package check

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// renderWorkTree renders env from the repository's work tree.
func renderWorkTree(t *testing.T, env string) (render.Source, []*unstructured.Unstructured) {
	t.Helper()
	src, err := render.FromDir("../../..")
	require.NoError(t, err)
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: env})
	require.NoError(t, err)
	return src, res.Objects
}

func TestFlowsAllowedOnTheWorkTree(t *testing.T) {
	for _, env := range []string{"dev", "staging", "prod"} {
		t.Run(env, func(t *testing.T) {
			src, objs := renderWorkTree(t, env)
			v, w := flowsAllowed(src, src, env, objs)
			assert.Empty(t, v)
			assert.Empty(t, w, "every monitor and route resolves to pods")
		})
	}
}

// TestCheckFlowsAllowed: a Prometheus egress rule that loses Alertmanager's port fails every env,
// naming both ends, the port and the policies that deny it.
func TestCheckFlowsAllowed(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("base/network/monitoring.yaml", `    - to:
        - podSelector:
            matchLabels:
              app.kubernetes.io/name: alertmanager
      ports:
        - protocol: TCP
          port: 9093
`, "")
	commit("monitoring: Prometheus no longer reaches Alertmanager")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		got := violations(env, "flows-allowed")
		require.Len(t, got, 1, "%s: %+v", env.Env, got)
		assert.Equal(t, "prometheus → alertmanager", got[0].Object)
		assert.Equal(t, "9093/TCP (alerts reach Alertmanager) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, prometheus in llm-monitoring allows it", got[0].Message)
	}
}

// TestFlowsAllowedNamesEachDeniedFlow breaks the render of prod in memory, one policy at a time,
// and expects exactly the flows that break.
func TestFlowsAllowedNamesEachDeniedFlow(t *testing.T) {
	cases := []struct {
		name   string
		policy string // namespace/name of the NetworkPolicy to change
		change func(spec map[string]any)
		want   []string
	}{
		{"vLLM no longer lets Prometheus or the pickers in", "llm-inference/vllm", func(spec map[string]any) {
			rules := spec["ingress"].([]any)
			from := rules[0].(map[string]any)["from"].([]any)
			rules[0].(map[string]any)["from"] = from[:1] // the Gateway's pods only
		}, []string{
			"prometheus → Deployment llm-inference/vllm-qwen: 8000/TCP (scrape of ServiceMonitor llm-monitoring/vllm) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, vllm in llm-inference allows it",
			"prometheus → Deployment llm-inference/vllm-llama: 8000/TCP (scrape of ServiceMonitor llm-monitoring/vllm) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, vllm in llm-inference allows it",
			"prometheus → Deployment llm-inference/vllm-qwen-canary: 8000/TCP (scrape of ServiceMonitor llm-monitoring/vllm) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, vllm in llm-inference allows it",
			// nor the endpoint pickers read its metrics
			"Deployment llm-inference/epp-qwen → Deployment llm-inference/vllm-qwen: 8000/TCP (the endpoint picker of InferencePool llm-inference/qwen reads its pods' metrics) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, vllm in llm-inference allows it",
			"Deployment llm-inference/epp-llama → Deployment llm-inference/vllm-llama: 8000/TCP (the endpoint picker of InferencePool llm-inference/llama reads its pods' metrics) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, vllm in llm-inference allows it",
			"Deployment llm-inference/epp-qwen-canary → Deployment llm-inference/vllm-qwen-canary: 8000/TCP (the endpoint picker of InferencePool llm-inference/qwen-canary reads its pods' metrics) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, vllm in llm-inference allows it",
		}},
		{"llm-api's DNS only over UDP", "llm-api/allow-dns", func(spec map[string]any) {
			to := spec["egress"].([]any)[0].(map[string]any)
			to["ports"] = to["ports"].([]any)[:1]
		}, []string{
			"Deployment llm-api/rag-api → kube-dns: 53/TCP (DNS) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, rag-api in llm-api allows it",
		}},
		{"the object store's address excepted", "llm-inference/weights-sync", func(spec map[string]any) {
			block := spec["egress"].([]any)[0].(map[string]any)["to"].([]any)[0].(map[string]any)["ipBlock"].(map[string]any)
			block["except"] = []any{"169.254.0.0/16", "203.0.113.0/24"}
		}, []string{
			"Job llm-inference/weights-sync-llama-0e9e39f → object-store (203.0.113.10): 443/TCP (the weights download) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, weights-sync in llm-inference allows it",
			"Job llm-inference/weights-sync-qwen-a09a354 → object-store (203.0.113.10): 443/TCP (the weights download) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, weights-sync in llm-inference allows it",
			"Job llm-inference/weights-sync-qwen-bb46c15 → object-store (203.0.113.10): 443/TCP (the weights download) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, weights-sync in llm-inference allows it",
		}},
		{"dcgm-exporter on the host network: Prometheus's pod selector no longer reaches it", "llm-monitoring/default-deny", func(map[string]any) {}, []string{
			"prometheus → DaemonSet llm-monitoring/dcgm-exporter: 9400/TCP (scrape of ServiceMonitor llm-monitoring/dcgm-exporter) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, prometheus in llm-monitoring allows it",
		}},
		{"the Gateway's egress to vLLM on a named port vLLM does not have", "llm-inference/llm-gateway", func(spec map[string]any) {
			rule := spec["egress"].([]any)[0].(map[string]any)
			rule["ports"] = []any{map[string]any{"protocol": "TCP", "port": "metrics"}}
		}, []string{
			"gateway → Deployment llm-inference/vllm-qwen: 8000/TCP (HTTPRoute llm-inference/qwen to the pods of InferencePool llm-inference/qwen) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, llm-gateway in llm-inference allows it",
			"gateway → Deployment llm-inference/vllm-qwen-canary: 8000/TCP (HTTPRoute llm-inference/qwen to the pods of InferencePool llm-inference/qwen-canary) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, llm-gateway in llm-inference allows it",
			"gateway → Deployment llm-inference/vllm-llama: 8000/TCP (HTTPRoute llm-inference/llama to the pods of InferencePool llm-inference/llama) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, llm-gateway in llm-inference allows it",
		}},
		{"the endpoint pickers no longer admit the Gateway", "llm-inference/endpoint-picker", func(spec map[string]any) {
			spec["ingress"] = spec["ingress"].([]any)[1:] // Prometheus only
		}, []string{
			"gateway → Deployment llm-inference/epp-qwen: 9002/TCP (the Gateway asks the endpoint picker of InferencePool llm-inference/qwen (HTTPRoute llm-inference/qwen)) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, endpoint-picker in llm-inference allows it",
			"gateway → Deployment llm-inference/epp-qwen-canary: 9002/TCP (the Gateway asks the endpoint picker of InferencePool llm-inference/qwen-canary (HTTPRoute llm-inference/qwen)) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, endpoint-picker in llm-inference allows it",
			"gateway → Deployment llm-inference/epp-llama: 9002/TCP (the Gateway asks the endpoint picker of InferencePool llm-inference/llama (HTTPRoute llm-inference/llama)) is denied: ingress of the destination: no rule of NetworkPolicy default-deny, endpoint-picker in llm-inference allows it",
		}},
		{"the endpoint pickers no longer reach vLLM's metrics", "llm-inference/endpoint-picker", func(spec map[string]any) {
			spec["egress"] = spec["egress"].([]any)[1:] // the API server only
		}, []string{
			"Deployment llm-inference/epp-qwen → Deployment llm-inference/vllm-qwen: 8000/TCP (the endpoint picker of InferencePool llm-inference/qwen reads its pods' metrics) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, endpoint-picker in llm-inference allows it",
			"Deployment llm-inference/epp-qwen-canary → Deployment llm-inference/vllm-qwen-canary: 8000/TCP (the endpoint picker of InferencePool llm-inference/qwen-canary reads its pods' metrics) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, endpoint-picker in llm-inference allows it",
			"Deployment llm-inference/epp-llama → Deployment llm-inference/vllm-llama: 8000/TCP (the endpoint picker of InferencePool llm-inference/llama reads its pods' metrics) is denied: egress of the source: no rule of NetworkPolicy allow-dns, default-deny, endpoint-picker in llm-inference allows it",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, objs := renderWorkTree(t, "prod")
			found := false
			for _, o := range objs {
				if o.GetKind() == "NetworkPolicy" && o.GetNamespace()+"/"+o.GetName() == tc.policy {
					tc.change(o.Object["spec"].(map[string]any))
					found = true
				}
			}
			require.True(t, found, tc.policy)
			if strings.Contains(tc.name, "host network") {
				for _, o := range objs {
					if o.GetKind() == "DaemonSet" && o.GetName() == "dcgm-exporter" {
						require.NoError(t, unstructured.SetNestedField(o.Object, true, "spec", "template", "spec", "hostNetwork"))
					}
				}
			}
			var got []string
			denied, _ := flowsAllowed(src, src, "prod", objs)
			for _, v := range denied {
				assert.Equal(t, "flows-allowed", v.Rule)
				got = append(got, v.Object+": "+v.Message)
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}

// TestFlowsAllowedWarnsOfWhatItCannotCheck: a monitor endpoint whose port no pod has and a route
// backend that is not rendered are each named as not checked; so is a pin older than the file.
func TestFlowsAllowedWarnsOfWhatItCannotCheck(t *testing.T) {
	src, objs := renderWorkTree(t, "prod")
	for _, o := range objs {
		switch {
		case o.GetKind() == "ServiceMonitor" && o.GetName() == "rag-api":
			eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
			eps[0].(map[string]any)["port"] = "metrics"
			require.NoError(t, unstructured.SetNestedSlice(o.Object, eps, "spec", "endpoints"))
		case o.GetKind() == "HTTPRoute" && o.GetName() == "llama":
			rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
			refs := rules[0].(map[string]any)["backendRefs"].([]any)
			refs[0].(map[string]any)["name"] = "vllm-llama-old"
			require.NoError(t, unstructured.SetNestedSlice(o.Object, rules, "spec", "rules"))
		}
	}
	v, w := flowsAllowed(src, src, "prod", objs)
	assert.Empty(t, v)
	var got []string
	for _, x := range w {
		got = append(got, x.Message)
	}
	assert.ElementsMatch(t, []string{
		"ServiceMonitor llm-monitoring/rag-api endpoint metrics resolves to no rendered pod and port: its scrape is not checked (declare its pods in base/network/flows.yaml)",
		"HTTPRoute llm-inference/llama backend InferencePool llm-inference/vllm-llama-old is not rendered: its traffic is not checked",
	}, got)

	old, err := render.FromDir(t.TempDir())
	require.NoError(t, err)
	v, w = flowsAllowed(old, src, "prod", objs)
	assert.Empty(t, v)
	require.Len(t, w, 1)
	assert.Contains(t, w[0].Message, "which predates base/network/flows.yaml")
}
