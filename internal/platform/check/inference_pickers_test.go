package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pickerRBAC is the picker's ServiceAccount, Role and RoleBinding: %[1]s the Role's rules.
const pickerRBAC = `
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: endpoint-picker, namespace: llm-inference}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: endpoint-picker, namespace: llm-inference}
rules: [%[1]s]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: endpoint-picker, namespace: llm-inference}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: endpoint-picker}
subjects: [{kind: ServiceAccount, name: endpoint-picker, namespace: llm-inference}]`

// objective is an InferenceObjective of pool %[1]s.
const objective = `
---
apiVersion: inference.networking.x-k8s.io/v1alpha2
kind: InferenceObjective
metadata: {name: qwen-batch, namespace: llm-inference}
spec: {poolRef: {group: inference.networking.k8s.io, kind: InferencePool, name: %[1]s}, priority: -10}`

const (
	grantPods       = `{apiGroups: [""], resources: [pods], verbs: [get, list, watch]}`
	grantPools      = `{apiGroups: [inference.networking.k8s.io], resources: [inferencepools], verbs: [get, list, watch]}`
	grantObjectives = `{apiGroups: [inference.networking.x-k8s.io], resources: [inferenceobjectives, inferencemodelrewrites], verbs: [get, list, watch]}`
)

// pickerManifest is the pooled fixture with the picker running as ServiceAccount endpoint-picker,
// its RBAC with rules, and extra appended.
func pickerManifest(t *testing.T, rules, extra string) string {
	t.Helper()
	m := fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", toPool)
	old := "spec: {containers: [{name: epp,"
	require.Contains(t, m, old)
	m = strings.Replace(m, old, "spec: {serviceAccountName: endpoint-picker, containers: [{name: epp,", 1)
	return m + fmt.Sprintf(pickerRBAC, rules) + extra
}

func TestInferencePickerRBAC(t *testing.T) {
	all := strings.Join([]string{grantPods, grantPools, grantObjectives}, ", ")
	for _, tc := range []struct {
		name, rules, extra string
		want               []string
	}{
		{name: "pods, pools, objectives and rewrites", rules: all, extra: fmt.Sprintf(objective, "qwen")},
		{name: "no objective rendered: still needed, as the upstream chart grants", rules: grantPods + ", " + grantPools, want: []string{
			"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch inferenceobjectives.inference.networking.x-k8s.io in llm-inference",
			"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch inferencemodelrewrites.inference.networking.x-k8s.io in llm-inference",
		}},
		{name: "no model rewrites", rules: grantPods + ", " + grantPools + `, {apiGroups: [inference.networking.x-k8s.io], resources: [inferenceobjectives], verbs: [get, list, watch]}`,
			want: []string{"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch inferencemodelrewrites.inference.networking.x-k8s.io in llm-inference: the picker does not start"}},
		{name: "wildcards", rules: `{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}`, extra: fmt.Sprintf(objective, "qwen")},
		{name: "pods without watch", rules: `{apiGroups: [""], resources: [pods], verbs: [get, list]}, ` + grantPools + ", " + grantObjectives,
			want: []string{"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not watch pods in llm-inference"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertViolations(t, tc.want, inferencePickerRBAC(parseObjects(t, pickerManifest(t, tc.rules, tc.extra))))
		})
	}
	t.Run("a binding to another ServiceAccount", func(t *testing.T) {
		m := strings.Replace(pickerManifest(t, all, ""), "subjects: [{kind: ServiceAccount, name: endpoint-picker,", "subjects: [{kind: ServiceAccount, name: rag-api,", 1)
		assertViolations(t, []string{
			"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch pods in llm-inference",
			"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch inferencepools.inference.networking.k8s.io in llm-inference",
			"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch inferenceobjectives.inference.networking.x-k8s.io in llm-inference",
			"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch inferencemodelrewrites.inference.networking.x-k8s.io in llm-inference",
		}, inferencePickerRBAC(parseObjects(t, m)))
	})
}

func TestInferencePoolOverlapsAndPorts(t *testing.T) {
	const second = `
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: qwen-canary, namespace: llm-inference}
spec:
  selector: {matchLabels: {%s}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {kind: Service, name: epp-qwen, port: {number: 9002}}`
	base := fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", toPool)
	t.Run("pools of their own pods", func(t *testing.T) {
		objs := parseObjects(t, base+fmt.Sprintf(second, "app.kubernetes.io/name: vllm-qwen-canary"))
		assertViolations(t, nil, inferencePoolOverlaps(objs))
	})
	t.Run("a canary pool selecting the stable pods", func(t *testing.T) {
		objs := parseObjects(t, base+fmt.Sprintf(second, "platform.llm/model: qwen"))
		assertViolations(t, []string{"inference-pool InferencePool llm-inference/qwen: and InferencePool llm-inference/qwen-canary select the same pods (Deployment llm-inference/vllm-qwen)"},
			inferencePoolOverlaps(objs))
	})
	for _, tc := range []struct {
		name, args string
		want       []string
	}{
		{name: "vLLM's default port", args: "[--served-model-name=qwen]"},
		{name: "--port 8000", args: "[--port, \"8000\"]"},
		{name: "--port=8001", args: "[--port=8001]",
			want: []string{"inference-pool InferencePool llm-inference/qwen: targets port 8000, but container vllm of Deployment llm-inference/vllm-qwen serves on 8001 (--port)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := strings.Replace(base, "{name: vllm, image: vllm:1,", "{name: vllm, image: vllm:1, args: "+tc.args+",", 1)
			require.NotEqual(t, base, m)
			assertViolations(t, tc.want, inferencePoolPorts(parseObjects(t, m)))
		})
	}
}

// interactive is the interactive InferenceObjective of pool qwen.
const interactive = `
---
apiVersion: inference.networking.x-k8s.io/v1alpha2
kind: InferenceObjective
metadata: {name: qwen-interactive, namespace: llm-inference}
spec: {poolRef: {group: inference.networking.k8s.io, kind: InferencePool, name: qwen}, priority: 0}`

func TestInferenceObjectivePools(t *testing.T) {
	base := fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", toPool)
	both := base + interactive + fmt.Sprintf(objective, "qwen")
	for _, tc := range []struct {
		name, manifest string
		want           []string
	}{
		{name: "interactive and batch", manifest: both},
		{name: "no objectives", manifest: base},
		{name: "a pool that is not rendered", manifest: base + interactive + fmt.Sprintf(objective, "qwen-v2"), want: []string{
			"inference-pool InferenceObjective llm-inference/qwen-batch: names InferencePool llm-inference/qwen-v2, which the env does not render",
			"inference-pool InferencePool llm-inference/qwen: has objectives but no batch one (priority below 0)"}},
		{name: "the pool's group wrong", manifest: strings.Replace(both, "{group: inference.networking.k8s.io, kind: InferencePool, name: qwen}, priority: -10", "{group: inference.networking.x-k8s.io, kind: InferencePool, name: qwen}, priority: -10", 1),
			want: []string{"inference-pool InferenceObjective llm-inference/qwen-batch: names its pool in group \"inference.networking.x-k8s.io\", not inference.networking.k8s.io"}},
		{name: "a priority above 0", manifest: strings.Replace(both, "priority: 0}", "priority: 5}", 1), want: []string{
			"inference-pool InferenceObjective llm-inference/qwen-interactive: has priority 5, above the interactive 0",
			"inference-pool InferencePool llm-inference/qwen: has objectives but no interactive one (priority 0)"}},
		{name: "no batch objective", manifest: base + interactive,
			want: []string{"inference-pool InferencePool llm-inference/qwen: has objectives but no batch one (priority below 0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertViolations(t, tc.want, inferenceObjectivePools(parseObjects(t, tc.manifest)))
		})
	}
}
