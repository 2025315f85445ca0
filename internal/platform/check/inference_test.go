package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pooled is a vLLM Deployment, its InferencePool and picker Service, and a route to the pool:
// %[1]s the pool's selector, %[2]s the picker Service's name, %[3]s the route's backendRefs.
const pooled = `apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-qwen, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "1"}}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: vllm-qwen}}
  template:
    metadata: {labels: {app.kubernetes.io/name: vllm-qwen, platform.llm/component: vllm, platform.llm/model: qwen}}
    spec: {containers: [{name: vllm, image: vllm:1, ports: [{name: http, containerPort: 8000}]}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: epp-qwen, namespace: llm-inference}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: epp-qwen}}
  template:
    metadata: {labels: {app.kubernetes.io/name: epp-qwen, platform.llm/component: endpoint-picker}}
    spec: {containers: [{name: epp, image: epp:1, args: [--pool-name=qwen, --pool-namespace=llm-inference], ports: [{name: grpc, containerPort: 9002}]}]}
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: qwen, namespace: llm-inference, labels: {platform.llm/model: qwen}, annotations: {argocd.argoproj.io/sync-wave: "1"}}
spec:
  selector: {matchLabels: {%[1]s}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {kind: Service, name: epp-qwen, port: {number: 9002}}
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: llm-inference}
spec: {selector: {app.kubernetes.io/name: epp-qwen}, ports: [{name: grpc, port: 9002, targetPort: grpc}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: qwen, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "2"}}
spec:
  parentRefs: [{name: llm-gateway}]
  rules: [{backendRefs: [%[3]s]}]`

const toPool = "{group: inference.networking.k8s.io, kind: InferencePool, name: qwen}"

func TestInferencePools(t *testing.T) {
	for _, tc := range []struct {
		name, selector, picker string
		want                   []string
	}{
		{name: "the pool selects the vLLM pods and names its picker", selector: "app.kubernetes.io/name: vllm-qwen", picker: "epp-qwen"},
		{name: "a selector that matches no pod", selector: "app.kubernetes.io/name: vllm-qwen-old", picker: "epp-qwen",
			want: []string{"inference-pool InferencePool llm-inference/qwen: selects no vLLM pod (selector app.kubernetes.io/name=vllm-qwen-old)"}},
		{name: "a selector that matches the picker, not vLLM", selector: "app.kubernetes.io/name: epp-qwen", picker: "epp-qwen",
			want: []string{"inference-pool InferencePool llm-inference/qwen: selects no vLLM pod"}},
		{name: "its picker's Service is not rendered", selector: "app.kubernetes.io/name: vllm-qwen", picker: "epp-other",
			want: []string{"inference-pool InferencePool llm-inference/qwen: its endpoint picker Service llm-inference/epp-qwen is not rendered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parseObjects(t, fmt.Sprintf(pooled, tc.selector, tc.picker, toPool))
			assertViolations(t, tc.want, inferencePools(objs))
		})
	}
}

// TestInferencePoolPickers: the picker and the pods a pool names must be the ones that serve it.
func TestInferencePoolPickers(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{name: "as rendered"},
		{name: "a picker port the Service lacks", old: "port: {number: 9002}", new: "port: {number: 9003}",
			want: []string{"inference-pool InferencePool llm-inference/qwen: names port 9003 of its endpoint picker Service llm-inference/epp-qwen, which has no such port"}},
		{name: "a picker Service without its Deployment", old: "spec: {selector: {app.kubernetes.io/name: epp-qwen}, ports:", new: "spec: {selector: {app.kubernetes.io/name: epp-gone}, ports:",
			want: []string{"inference-pool InferencePool llm-inference/qwen: its endpoint picker Service llm-inference/epp-qwen selects no rendered Deployment"}},
		{name: "a picker serving another pool", old: "--pool-name=qwen", new: "--pool-name=llama",
			want: []string{"inference-pool InferencePool llm-inference/qwen: its endpoint picker Deployment llm-inference/epp-qwen serves --pool-name=llama, not qwen"}},
		{name: "a pool selecting another model's pods", old: "platform.llm/model: qwen}}\n    spec: {containers: [{name: vllm", new: "platform.llm/model: llama}}\n    spec: {containers: [{name: vllm",
			want: []string{"inference-pool InferencePool llm-inference/qwen: is the pool of model qwen but selects the pods of Deployment llm-inference/vllm-qwen, whose model is \"llama\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifest := fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", toPool)
			if tc.old != "" {
				require.Contains(t, manifest, tc.old)
				manifest = strings.Replace(manifest, tc.old, tc.new, 1)
			}
			assertViolations(t, tc.want, inferencePools(parseObjects(t, manifest)))
		})
	}
}

func TestInferenceRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, backends string
		want           []string
	}{
		{name: "a pool of the route's namespace", backends: toPool},
		{name: "a Service", backends: "{name: vllm-qwen, port: 8000}"},
		{name: "a pool the env does not render", backends: "{group: inference.networking.k8s.io, kind: InferencePool, name: llama}",
			want: []string{"inference-route HTTPRoute llm-inference/qwen: sends to InferencePool llm-inference/llama, which the env does not render"}},
		{name: "a pool in another namespace", backends: "{group: inference.networking.k8s.io, kind: InferencePool, name: qwen, namespace: team-b}",
			want: []string{"inference-route HTTPRoute llm-inference/qwen: sends to InferencePool team-b/qwen in another namespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parseObjects(t, fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", tc.backends))
			assertViolations(t, tc.want, inferenceRoutes(objs))
		})
	}
}

func TestInferenceCanaryWeights(t *testing.T) {
	canary := func(stable, canary string) string {
		return fmt.Sprintf("{group: inference.networking.k8s.io, kind: InferencePool, name: qwen%s}, {group: inference.networking.k8s.io, kind: InferencePool, name: qwen-canary%s}", stable, canary)
	}
	for _, tc := range []struct {
		name, backends string
		want           []string
	}{
		{name: "90 and 10", backends: canary(", weight: 90", ", weight: 10")},
		{name: "one pool, any weight", backends: "{group: inference.networking.k8s.io, kind: InferencePool, name: qwen, weight: 7}"},
		{name: "one pool, weight 0", backends: "{group: inference.networking.k8s.io, kind: InferencePool, name: qwen, weight: 0}",
			want: []string{"inference-canary-weights HTTPRoute llm-inference/qwen: rule 1 sends to InferencePool qwen alone with weight 0"}},
		{name: "two Services are not a pool canary", backends: "{name: a, port: 80, weight: 9}, {name: b, port: 80, weight: 1}"},
		{name: "90 and 20", backends: canary(", weight: 90", ", weight: 20"),
			want: []string{"inference-canary-weights HTTPRoute llm-inference/qwen: rule 1 splits between pools with weights summing to 110 (InferencePool qwen 90, InferencePool qwen-canary 20), not 100"}},
		{name: "no weights: 1 each", backends: canary("", ""),
			want: []string{"inference-canary-weights HTTPRoute llm-inference/qwen: rule 1 splits between pools with weights summing to 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parseObjects(t, fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", tc.backends))
			assertViolations(t, tc.want, inferenceCanaryWeights(objs))
		})
	}
}

func TestRoutesAfterBackendsThroughPools(t *testing.T) {
	objs := parseObjects(t, fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", toPool))
	assertViolations(t, nil, routesAfterBackends(objs))
	objs[len(objs)-1].SetAnnotations(map[string]string{"argocd.argoproj.io/sync-wave": "1"})
	assertViolations(t, []string{"route-after-backend HTTPRoute llm-inference/qwen: HTTPRoute llm-inference/qwen (sync wave 1) sends traffic to Deployment llm-inference/vllm-qwen (sync wave 1)"},
		routesAfterBackends(objs))
}

// TestCheckInferenceRules: each rule of the inference gateway fails the gate on an edit of the
// repository, naming the object, in every env that renders it; the repository as it is passes.
func TestCheckInferenceRules(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new, rule, object, message string
		envs                                        int
	}{
		{"a pool selector that matches no pod", "base/vllm/pools.yaml", "app.kubernetes.io/name: vllm-llama", "app.kubernetes.io/name: vllm-llama-old",
			"inference-pool", "InferencePool llm-inference/llama", "selects no vLLM pod (selector app.kubernetes.io/name=vllm-llama-old)", 3},
		{"a route to a pool that is not rendered", "base/vllm/llama.yaml", "kind: InferencePool\n          name: llama", "kind: InferencePool\n          name: llama-v2",
			"inference-route", "HTTPRoute llm-inference/llama", "sends to InferencePool llm-inference/llama-v2, which the env does not render", 3},
		{"a route to a pool of another namespace", "base/vllm/llama.yaml", "kind: InferencePool\n          name: llama", "kind: InferencePool\n          namespace: llm-batch\n          name: llama",
			"inference-route", "HTTPRoute llm-inference/llama", "sends to InferencePool llm-batch/llama in another namespace", 3},
		{"a canary whose weights do not sum", "overlays/prod/canary/route-split.yaml", "weight: 10", "weight: 20",
			"inference-canary-weights", "HTTPRoute llm-inference/qwen", "rule 1 splits between pools with weights summing to 110", 1},
		{"a canary pool selecting the stable pods", "overlays/prod/canary/canary.yaml", "      app.kubernetes.io/name: vllm-qwen-canary\n  targetPorts:", "      app.kubernetes.io/name: vllm-qwen\n  targetPorts:",
			"inference-pool", "InferencePool llm-inference/qwen", "and InferencePool llm-inference/qwen-canary select the same pods (Deployment llm-inference/vllm-qwen)", 1},
		{"a pool's target port vLLM does not serve on", "base/vllm/qwen.yaml", "--port=8000", "--port=8001",
			"inference-pool", "InferencePool llm-inference/qwen", "targets port 8000, but container vllm of Deployment llm-inference/vllm-qwen serves on 8001 (--port)", 3},
		{"a picker that may not read objectives", "base/vllm/picker.yaml", `resources: ["inferenceobjectives", "inferencemodelrewrites"]`, `resources: ["inferencemodelrewrites"]`,
			"inference-pool", "InferencePool llm-inference/qwen", "its endpoint picker Deployment llm-inference/epp-qwen runs as ServiceAccount endpoint-picker, which may not get, list, watch inferenceobjectives.inference.networking.x-k8s.io", 3},
		{"an objective of a pool that is not rendered", "base/vllm/objectives.yaml", "    name: llama\n  priority: -10", "    name: llama-v2\n  priority: -10",
			"inference-pool", "InferenceObjective llm-inference/llama-batch", "names InferencePool llm-inference/llama-v2, which the env does not render", 3},
		{"a picker without the model-rewrite right", "base/vllm/picker.yaml", `resources: ["inferenceobjectives", "inferencemodelrewrites"]`, `resources: ["inferenceobjectives"]`,
			"inference-pool", "InferencePool llm-inference/qwen", "which may not get, list, watch inferencemodelrewrites.inference.networking.x-k8s.io", 3},
		{"a plugin type picker v1.5.0 does not register", "base/vllm/picker-config.yaml", "  - type: queue-scorer", "  - type: queue-scorr",
			"inference-pool", "InferencePool llm-inference/qwen", `names plugin type "queue-scorr", which picker v1.5.0 does not register`, 3},
		{"a pluginRef to no plugin", "base/vllm/picker-config.yaml", "- pluginRef: prefix-cache-scorer", "- pluginRef: prefix-scorer",
			"inference-pool", "InferencePool llm-inference/qwen", `has profile default refer to plugin "prefix-scorer", which its plugins do not define`, 3},
		{"an unknown feature gate", "base/vllm/picker-config.yaml", "  - flowControl", "  - flowcontrol",
			"inference-pool", "InferencePool llm-inference/qwen", `turns on feature gate "flowcontrol", which picker v1.5.0 does not know`, 3},
		{"no flow control under batch objectives", "base/vllm/picker-config.yaml", "featureGates:\n  - flowControl\n", "",
			"inference-pool", "InferencePool llm-inference/qwen", "has objectives below priority 0, but its endpoint picker Deployment llm-inference/epp-qwen runs without feature gate flowControl", 3},
		{"a config file the ConfigMap does not hold", "base/vllm/picker.yaml", "--config-file=/config/config.yaml", "--config-file=/config/epp.yaml",
			"inference-pool", "InferencePool llm-inference/qwen", "reads --config-file=/config/epp.yaml, but ConfigMap llm-inference/endpoint-picker-", 3},
		{"a picker without --pool-namespace", "base/vllm/picker.yaml", "            - --pool-namespace=llm-inference\n", "",
			"inference-pool", "InferencePool llm-inference/qwen", "serves --pool-namespace=default (without the flag: env NAMESPACE, else default), not llm-inference", 3},
		{"a picker without --pool-name", "base/vllm/picker.yaml", "            - --pool-name=qwen\n", "",
			"inference-pool", "InferencePool llm-inference/qwen", "has no --pool-name", 3},
		{"a gRPC port the picker Service does not lead to", "base/vllm/picker.yaml", "--grpc-port=9002", "--grpc-port=9012",
			"inference-pool", "InferencePool llm-inference/qwen", "leads to container port 9002 of Deployment llm-inference/epp-qwen, but the picker listens for ext_proc on 9012", 3},
		{"a route to a pool without its group", "base/vllm/llama.yaml", "        - group: inference.networking.k8s.io\n          kind: InferencePool", "        - kind: InferencePool",
			"inference-route", "HTTPRoute llm-inference/llama", `sends to kind InferencePool llama in group "", not inference.networking.k8s.io`, 3},
		{"an objective above the interactive priority", "base/vllm/objectives.yaml", "    name: qwen\n  priority: -10", "    name: qwen\n  priority: 10",
			"inference-pool", "InferenceObjective llm-inference/qwen-batch", "has priority 10, above the interactive 0", 3},
		{"a pool without its batch objective", "base/vllm/objectives.yaml", "    name: llama\n  priority: -10", "    name: llama\n  priority: 0",
			"inference-pool", "InferencePool llm-inference/llama", "has objectives but no batch one", 3},
		{"an objective naming its pool in the wrong group", "base/vllm/objectives.yaml", "    group: inference.networking.k8s.io\n    kind: InferencePool\n    name: qwen\n  priority: -10", "    group: inference.networking.x-k8s.io\n    kind: InferencePool\n    name: qwen\n  priority: -10",
			"inference-pool", "InferenceObjective llm-inference/qwen-batch", `names its pool in group "inference.networking.x-k8s.io", not inference.networking.k8s.io`, 3},
		{"a picker that may not reach the API server", "base/network/inference.yaml", "    - ports:\n        - protocol: TCP\n          port: 443\n        - protocol: TCP\n          port: 6443\n", "",
			"flows-allowed", "Deployment llm-inference/epp-qwen → kube-apiserver (198.51.100.1)", "443/TCP (the pickers watch their pool, its pods and objectives (Service kubernetes)) is denied", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, commit, edit := repoCopy(t)
			edit(tc.file, tc.old, tc.new)
			commit(tc.name)
			res := runCheck(t, dir)
			assert.False(t, res.Passed)
			failed := 0
			for _, env := range res.Envs {
				got := violations(env, tc.rule)
				if len(got) == 0 {
					continue
				}
				failed++
				assert.Equal(t, tc.object, got[0].Object, env.Env)
				assert.Contains(t, got[0].Message, tc.message, env.Env)
			}
			assert.Equal(t, tc.envs, failed, "envs failing %s", tc.rule)
		})
	}
}
