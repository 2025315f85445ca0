package cost

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/drift"
)

// TestPricesOfThePlatformRule reads the prices the platform states, from its own file.
func TestPricesOfThePlatformRule(t *testing.T) {
	data, err := os.ReadFile("../../base/monitoring/prometheusrule.yaml")
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &u.Object))
	p := Prices{}
	p.AddRules(u)
	assert.Equal(t, Prices{"l40s": 1.861, "t4": 0.526}, p)
}

func vllm(t *testing.T, replicas int, gpus string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-qwen, namespace: llm-inference}
spec:
  replicas: `+string(rune('0'+replicas))+`
  template:
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: accelerator, operator: In, values: [l40s]}
              - {key: platform.llm/pool, operator: In, values: [gpu]}
      containers:
      - name: vllm
        resources: {limits: {nvidia.com/gpu: "`+gpus+`"}}
      - name: sidecar
`), &u.Object))
	return u
}

func TestOfDrift(t *testing.T) {
	prices := Prices{"l40s": 1.861}
	scaled := func(from, to any) *drift.Object {
		return &drift.Object{Kind: "Deployment", Status: drift.Modified, Fields: []drift.Field{{Path: ".spec.replicas", Desired: from, Live: to}}}
	}
	for _, tc := range []struct {
		name    string
		obj     *drift.Object
		desired *unstructured.Unstructured
		prices  Prices
		want    *drift.Cost
	}{
		{"kubectl scale 2 → 5", scaled(int64(2), int64(5)), vllm(t, 2, "1"), prices,
			&drift.Cost{GPUs: 3, Card: "l40s", USDPerHour: 5.58, Note: "replicas 2 → 5 on l40s: +3 GPUs, about +5.58 USD per hour"}},
		{"scaled down, two GPUs a pod", scaled(int64(2), float64(1)), vllm(t, 2, "2"), prices,
			&drift.Cost{GPUs: -2, Card: "l40s", USDPerHour: -3.72, Note: "replicas 2 → 1 on l40s: -2 GPUs, about -3.72 USD per hour"}},
		{"a GPU limit raised", &drift.Object{Status: drift.Modified, Fields: []drift.Field{
			{Path: ".spec.template.spec.containers[name=vllm].resources.limits[\"nvidia.com/gpu\"]", Desired: "1", Live: "2"}}},
			vllm(t, 3, "1"), prices,
			&drift.Cost{GPUs: 3, Card: "l40s", USDPerHour: 5.58, Note: "nvidia.com/gpu 1 → 2 per pod on l40s: +3 GPUs, about +5.58 USD per hour"}},
		{"a GPU limit removed", &drift.Object{Status: drift.Modified, Fields: []drift.Field{
			{Path: ".spec.template.spec.containers[name=vllm].resources.limits[\"nvidia.com/gpu\"]", Desired: "1", Live: nil}}},
			vllm(t, 1, "1"), prices,
			&drift.Cost{GPUs: -1, Card: "l40s", USDPerHour: -1.86, Note: "nvidia.com/gpu 1 → 0 per pod on l40s: -1 GPUs, about -1.86 USD per hour"}},
		{"no price for the card", scaled(int64(1), int64(2)), vllm(t, 1, "1"), Prices{},
			&drift.Cost{GPUs: 1, Card: "l40s", Note: `replicas 1 → 2 on l40s: +1 GPUs (no price for "l40s" in the llm:gpu_price_usd_per_hour rules)`}},
		{"a workload without GPUs", scaled(int64(1), int64(3)), vllm(t, 1, "0"), prices, nil},
		{"another field", &drift.Object{Status: drift.Modified, Fields: []drift.Field{{Path: ".spec.paused", Desired: false, Live: true}}}, vllm(t, 1, "1"), prices, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, OfDrift(tc.obj, tc.desired, tc.prices))
		})
	}
}
