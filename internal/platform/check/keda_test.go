package check

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scaledObject renders a ScaledObject with one prometheus trigger; extra is appended to spec.
func scaledObject(query, threshold, metricType string, minR, maxR int, extra string) string {
	mt := ""
	if metricType != "" {
		mt = ", metricType: " + metricType
	}
	return fmt.Sprintf(`{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: vllm-qwen, namespace: llm-inference},
  spec: {scaleTargetRef: {name: vllm-qwen}, minReplicaCount: %d, maxReplicaCount: %d %s,
    triggers: [{type: prometheus, name: kv-cache %s, metadata: {serverAddress: "http://p:9090", query: '%s', threshold: "%s"}}]}}`,
		minR, maxR, extra, mt, query, threshold)
}

func TestKEDAReach(t *testing.T) {
	const fb = ", fallback: {failureThreshold: 3, replicas: 2}"
	const kvAvg = `avg(vllm:kv_cache_usage_perc{model_name="qwen"})`
	const kvSum = `sum(vllm:kv_cache_usage_perc{model_name="qwen",service="vllm-qwen"})`
	cases := []struct {
		name string
		obj  string
		want []string // "rule: message substring", one per violation
	}{
		{"issue #15: avg of the KV fraction under AverageValue stops at 2 of 8",
			scaledObject(kvAvg, "0.8", "", 2, 8, fb),
			[]string{"capacity-keda-reach: trigger kv-cache (" + kvAvg + ", threshold 0.8, metricType AverageValue) can never reach maxReplicaCount 8: avg(vllm:kv_cache_usage_perc) of a fraction is at most 1, so with every pod full at 2 replicas the HPA computes ceil(1 / 0.8) = 2; scaling stops at 2"}},
		{"sum of the KV fraction under AverageValue reaches the maximum", scaledObject(kvSum, "0.8", "AverageValue", 2, 8, fb), nil},
		{"avg of the KV fraction under Value reaches the maximum", scaledObject(kvAvg, "0.8", "Value", 2, 8, fb), nil},
		{"avg under AverageValue is fine while the maximum is ceil(1/threshold)", scaledObject(kvAvg, "0.8", "", 2, 2, fb), nil},
		{"a low threshold raises the cap but not to the maximum",
			scaledObject(kvAvg, "0.3", "", 2, 8, fb), []string{"ceil(1 / 0.3) = 4; scaling stops at 4"}},
		{"sum with a threshold within the HPA's tolerance of 1 never grows",
			scaledObject(kvSum, "0.95", "", 1, 4, fb), []string{"at 1 replicas the HPA computes ceil(1 / 0.95), within the HPA's 10% tolerance of 1; scaling stops at 1"}},
		{"Value with a threshold the fraction never exceeds", scaledObject(kvAvg, "1", "Value", 1, 4, fb),
			[]string{"at 1 replicas the HPA computes ceil(1 × 1 / 1) = 1; scaling stops at 1"}},
		{"scale from zero starts at one replica", scaledObject(kvAvg, "0.8", "", 0, 3, ", fallback: {failureThreshold: 3, replicas: 0}"),
			[]string{"at 2 replicas the HPA computes ceil(1 / 0.8) = 2"}},
		{"a metric named _ratio is a fraction", scaledObject(`max(gpu_busy_ratio{pod=~"vllm-.*"})`, "0.5", "", 1, 8, fb),
			[]string{"max(gpu_busy_ratio) of a fraction is at most 1"}},
		{"a count is unbounded: no verdict", scaledObject(`sum(vllm:num_requests_waiting{model_name="qwen"})`, "10", "", 1, 8, fb), nil},
		{"a query of another shape: no verdict", scaledObject(`avg(rate(vllm:kv_cache_usage_perc[5m]))`, "0.1", "", 1, 8, fb), nil},
		{"several series (by): no verdict", scaledObject(`avg by (pod) (vllm:kv_cache_usage_perc)`, "0.8", "", 1, 8, fb), nil},
		{"a metric not known to be a fraction: no verdict", scaledObject(`avg(DCGM_FI_DEV_GPU_UTIL)`, "80", "", 1, 8, fb), nil},
		{"scalingModifiers: the HPA sees the formula, no verdict",
			scaledObject(kvAvg, "0.8", "", 1, 8, fb+", advanced: {scalingModifiers: {formula: kv-cache * 4, target: '1'}}"), nil},
		{"no fallback", scaledObject(kvSum, "0.8", "", 1, 8, ""), []string{"keda-fallback: no spec.fallback"}},
		{"fallback replicas are clamped by the HPA, not judged", scaledObject(kvSum, "0.8", "", 4, 8, ", fallback: {failureThreshold: 3, replicas: 1}"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := kedaReach(parseObjects(t, tc.obj))
			require.Len(t, got, len(tc.want), "violations: %+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "ScaledObject llm-inference/vllm-qwen", got[i].Object)
				assert.Contains(t, got[i].Rule+": "+got[i].Message, w)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for q, want := range map[string]bool{
		`avg(vllm:kv_cache_usage_perc{model_name="qwen"})`:  true,
		`sum (vllm:gpu_cache_usage_perc)`:                   true,
		`vllm:kv_cache_usage_perc{pod="a"}`:                 true,
		`avg(vllm:kv_cache_usage_perc{model_name="qwen"}`:   false, // unbalanced
		`vllm:kv_cache_usage_perc{pod="a"})`:                false,
		`avg(vllm:kv_cache_usage_perc) * 2`:                 false,
		`count(vllm:kv_cache_usage_perc)`:                   false,
		`sum(vllm:num_requests_waiting{model_name="qwen"})`: false,
	} {
		_, ok := classify(q)
		assert.Equal(t, want, ok, q)
	}
}
