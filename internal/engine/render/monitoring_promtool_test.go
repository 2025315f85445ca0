package render

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestCostRulesEvaluatedByPrometheus runs prod's PrometheusRule through Prometheus' own rule
// engine (`promtool test rules`): two qwen pods on L40S serving 100 generated and 300 prompt tokens
// a second each must cost 2 GPUs × the stated L40S price ÷ 800 tokens a second, per 1,000 tokens.
// The expected values are computed here from the inputs and the price in the rule file.
func TestCostRulesEvaluatedByPrometheus(t *testing.T) {
	promtool := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Promtool })
	var groups []any
	for _, o := range monitoringObjects(renderRepo(t, "prod").Objects, "PrometheusRule") {
		gs, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		groups = append(groups, gs...)
	}
	require.NotEmpty(t, groups)
	var price float64
	for _, r := range ruleList(t, renderRepo(t, "prod").Objects) {
		if r.Record == "llm:gpu_price_usd_per_hour" && r.Labels["accelerator"] == "l40s" {
			_, err := fmt.Sscanf(r.Expr, "vector(%g)", &price)
			require.NoError(t, err, r.Expr)
		}
	}
	require.Positive(t, price)

	dir := t.TempDir()
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644))

	const labels = `namespace="llm-inference", model_name="qwen", model_revision="a09a354", accelerator="l40s"`
	var series []map[string]string
	for _, pod := range []string{"vllm-qwen-7c9d6b5f4-abcde", "vllm-qwen-7c9d6b5f4-fghij"} {
		at := fmt.Sprintf(`{%s, pod=%q}`, labels, pod)
		series = append(series,
			map[string]string{"series": "vllm:generation_tokens_total" + at, "values": "0+6000x20"}, // 100 a second
			map[string]string{"series": "vllm:prompt_tokens_total" + at, "values": "0+18000x20"},    // 300 a second
			map[string]string{"series": "vllm:num_requests_running" + at, "values": "3x20"})
	}
	perHour := 2 * price
	test := map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":     "1m",
			"input_series": series,
			"promql_expr_test": []any{
				map[string]any{"expr": "model_revision:vllm_gpu_cost_usd_per_hour", "eval_time": "10m",
					"exp_samples": []any{map[string]any{"labels": "model_revision:vllm_gpu_cost_usd_per_hour{" + labels + "}", "value": perHour}}},
				map[string]any{"expr": "model_revision:vllm_cost_usd_per_1k_tokens:rate5m", "eval_time": "10m",
					"exp_samples": []any{map[string]any{"labels": "model_revision:vllm_cost_usd_per_1k_tokens:rate5m{" + labels + "}", "value": perHour / 3600 * 1000 / 800}}},
				map[string]any{"expr": "model_revision:vllm_cost_usd_per_1k_generated_tokens:rate5m", "eval_time": "10m",
					"exp_samples": []any{map[string]any{"labels": "model_revision:vllm_cost_usd_per_1k_generated_tokens:rate5m{" + labels + "}", "value": perHour / 3600 * 1000 / 200}}},
			},
		}},
	}
	data, err := yaml.Marshal(test)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test.yaml"), data, 0o644))
	cmd := exec.Command(promtool, "test", "rules", "test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s\n%s", out, data)
}
