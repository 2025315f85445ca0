package cost

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	return u
}

// platformPrices are the prices the platform states, read from its own rule file.
func platformPrices(t *testing.T) *Prices {
	t.Helper()
	data, err := os.ReadFile("../../../base/monitoring/prometheusrule.yaml")
	require.NoError(t, err)
	p := &Prices{}
	p.AddRules(object(t, string(data)))
	return p
}

func TestPricesOfThePlatformRule(t *testing.T) {
	p := platformPrices(t)
	for card, want := range map[string]float64{"l40s": 1.861, "t4": 0.526, "L40S": 1.861} {
		got, why := p.Price(card)
		assert.Empty(t, why, card)
		assert.Equal(t, want, got, card)
	}
	_, why := p.Price("h100")
	assert.Equal(t, "no price for h100 in the llm:gpu_price_usd_per_hour rules", why)

	p.AddRules(object(t, `
kind: PrometheusRule
spec: {groups: [{rules: [{record: llm:gpu_price_usd_per_hour, expr: vector(9.99), labels: {accelerator: L40S}}]}]}`))
	_, why = p.Price("l40s")
	assert.Equal(t, "the llm:gpu_price_usd_per_hour rules give l40s two prices", why)
}

// workload is a Deployment (or kind) of replicas pods (none: Git leaves them out), each with
// GPU limits per container, placed by the affinity given.
func workload(t *testing.T, kind string, replicas int, placement string, gpus ...string) *unstructured.Unstructured {
	doc := "apiVersion: apps/v1\nkind: " + kind + "\nmetadata: {name: vllm-qwen, namespace: llm-inference}\nspec:\n"
	if replicas >= 0 {
		doc += fmt.Sprintf("  replicas: %d\n", replicas)
	}
	doc += "  template:\n    spec:\n" + placement + "      containers:\n"
	for i, g := range gpus {
		doc += fmt.Sprintf("      - name: c%d\n", i)
		if g != "" {
			doc += fmt.Sprintf("        resources: {limits: {nvidia.com/gpu: %q}}\n", g)
		}
	}
	doc += "      initContainers:\n      - {name: warm, resources: {limits: {nvidia.com/gpu: \"4\"}}}\n"
	return object(t, doc)
}

const l40s = `      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: accelerator, operator: In, values: [l40s]}
              - {key: platform.llm/pool, operator: In, values: [gpu]}
`

// twoLabels names the card under two label keys, spelled differently.
const twoLabels = "      nodeSelector: {accelerator: l40s, nvidia.com/gpu.product: NVIDIA-L40S}\n"

func usd(v float64) *float64 { return &v }

func TestOfDrift(t *testing.T) {
	prices := platformPrices(t)
	replicas := drift.Field{Path: ".spec.replicas"}
	limit := drift.Field{Path: `.spec.template.spec.containers[name=c0].resources.limits["nvidia.com/gpu"]`}
	initLimit := drift.Field{Path: `.spec.template.spec.initContainers[name=warm].resources.limits["nvidia.com/gpu"]`}
	image := drift.Field{Path: ".spec.template.spec.containers[name=c0].image"}
	modified := func(fields ...drift.Field) *drift.Object {
		return &drift.Object{Kind: "Deployment", Status: drift.Modified, Fields: fields}
	}
	for _, tc := range []struct {
		name      string
		obj       *drift.Object
		git, live *unstructured.Unstructured
		want      *drift.Cost
	}{
		{"kubectl scale 2 → 5", modified(replicas), workload(t, "Deployment", 2, l40s, "1"), workload(t, "Deployment", 5, l40s, "1"),
			&drift.Cost{GPUs: 3, Card: "l40s", USDPerHour: usd(5.58), Note: "replicas 2 → 5 on l40s: +3 GPUs, about +5.58 USD per hour at the stated price"}},
		{"replicas Git leaves out (1)", modified(replicas), workload(t, "Deployment", -1, l40s, "1"), workload(t, "Deployment", 3, l40s, "1"),
			&drift.Cost{GPUs: 2, Card: "l40s", USDPerHour: usd(3.72), Note: "replicas 1 → 3 on l40s: +2 GPUs, about +3.72 USD per hour at the stated price"}},
		{"a limit raised under an autoscaler: at the live replicas", modified(limit), workload(t, "Deployment", 1, l40s, "1"), workload(t, "Deployment", 4, l40s, "2"),
			&drift.Cost{GPUs: 4, Card: "l40s", USDPerHour: usd(7.44), Note: "nvidia.com/gpu 1 → 2 per pod on l40s: +4 GPUs, about +7.44 USD per hour at the stated price"}},
		{"scaled and a limit added at once", modified(replicas, limit), workload(t, "Deployment", 1, l40s, ""), workload(t, "Deployment", 3, l40s, "1"),
			&drift.Cost{GPUs: 3, Card: "l40s", USDPerHour: usd(5.58), Note: "replicas 1 → 3, nvidia.com/gpu 0 → 1 per pod on l40s: +3 GPUs, about +5.58 USD per hour at the stated price"}},
		{"a limit removed, two containers", modified(limit), workload(t, "Deployment", 2, l40s, "1", "1"), workload(t, "Deployment", 2, l40s, "", "1"),
			&drift.Cost{GPUs: -2, Card: "l40s", USDPerHour: usd(-3.72), Note: "nvidia.com/gpu 2 → 1 per pod on l40s: -2 GPUs, about -3.72 USD per hour at the stated price"}},
		{"the card under two labels", modified(replicas), workload(t, "StatefulSet", 1, twoLabels, "1"), workload(t, "StatefulSet", 2, twoLabels, "1"),
			&drift.Cost{GPUs: 1, Card: "l40s", USDPerHour: usd(1.86), Note: "replicas 1 → 2 on l40s: +1 GPUs, about +1.86 USD per hour at the stated price"}},
		{"no card named", modified(replicas), workload(t, "Deployment", 1, "", "1"), workload(t, "Deployment", 2, "", "1"),
			&drift.Cost{GPUs: 1, Note: "replicas 1 → 2: +1 GPUs (the card is not known: the pod names none, or several)"}},
		{"an init container's limit adds no GPU to the pod", modified(initLimit), workload(t, "Deployment", 1, l40s, "1"), workload(t, "Deployment", 1, l40s, "1"), nil},
		{"a workload without GPUs", modified(replicas), workload(t, "Deployment", 1, l40s, ""), workload(t, "Deployment", 3, l40s, ""), nil},
		{"another field", modified(image), workload(t, "Deployment", 1, l40s, "1"), workload(t, "Deployment", 3, l40s, "1"), nil},
		{"a kind not costed", &drift.Object{Kind: "LeaderWorkerSet", Status: drift.Modified, Fields: []drift.Field{replicas}},
			workload(t, "LeaderWorkerSet", 1, l40s, "1"), workload(t, "LeaderWorkerSet", 2, l40s, "1"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, OfDrift(tc.obj, tc.git, tc.live, prices))
		})
	}
}

func TestOfScaledObject(t *testing.T) {
	prices := platformPrices(t)
	min := func(from, to any) *drift.Object {
		return &drift.Object{Kind: "ScaledObject", Status: drift.Modified, Fields: []drift.Field{{Path: ".spec.minReplicaCount", Desired: from, Live: to}}}
	}
	target := workload(t, "Deployment", 2, l40s, "1")
	price := 3.72
	assert.Equal(t, &drift.Cost{GPUs: 2, Card: "l40s", USDPerHour: &price,
		Note: "minimum replicas of vllm-qwen 2 → 4 on l40s: at least +2 GPUs, about +3.72 USD per hour at the stated price"},
		OfScaledObject(min(int64(2), int64(4)), target, prices))
	assert.Nil(t, OfScaledObject(min(int64(2), int64(4)), workload(t, "Deployment", 2, l40s, ""), prices), "a target without GPUs")
	assert.Nil(t, OfScaledObject(min(int64(2), int64(4)), nil, prices), "no target in Git")
	assert.True(t, Changes(min(int64(1), int64(2))))
	assert.False(t, Changes(&drift.Object{Kind: "ScaledObject", Status: drift.Modified, Fields: []drift.Field{{Path: ".spec.maxReplicaCount"}}}),
		"the maximum costs only under load")
}
