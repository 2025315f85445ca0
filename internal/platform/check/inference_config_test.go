package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pickerConfigMap is the picker's ConfigMap, key config.yaml holding %s (indented four spaces).
const pickerConfigMap = `
---
apiVersion: v1
kind: ConfigMap
metadata: {name: endpoint-picker, namespace: llm-inference}
data:
  config.yaml: |
%s`

// goodPickerConfig is base/vllm/picker-config.yaml's shape.
const goodPickerConfig = `    apiVersion: inference.networking.x-k8s.io/v1alpha1
    kind: EndpointPickerConfig
    featureGates: [flowControl]
    plugins:
      - type: queue-scorer
      - type: max-score-picker
      - {name: prefix, type: prefix-cache-scorer}
    schedulingProfiles:
      - name: default
        plugins:
          - {pluginRef: queue-scorer, weight: 2}
          - {pluginRef: prefix, weight: 3}
          - pluginRef: max-score-picker`

// configuredPicker is the pooled fixture with its picker reading /config/config.yaml from
// ConfigMap endpoint-picker, the pool's objectives, and the ConfigMap holding config.
func configuredPicker(t *testing.T, config string) string {
	t.Helper()
	m := fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", toPool)
	old := "spec: {containers: [{name: epp, image: epp:1, args: [--pool-name=qwen, --pool-namespace=llm-inference], ports: [{name: grpc, containerPort: 9002}]}]}"
	require.Contains(t, m, old)
	m = strings.Replace(m, old, `spec:
      containers: [{name: epp, image: epp:1, args: [--pool-name=qwen, --pool-namespace=llm-inference, --config-file=/config/config.yaml, --grpc-port=9002],
        ports: [{name: grpc, containerPort: 9002}], volumeMounts: [{name: config, mountPath: /config}]}]
      volumes: [{name: config, configMap: {name: endpoint-picker}}]`, 1)
	return m + interactive + fmt.Sprintf(objective, "qwen") + fmt.Sprintf(pickerConfigMap, config)
}

// TestInferencePickerConfig: the picker's flags and configuration file are what the v1.5.0
// picker starts with and serves its pool by.
func TestInferencePickerConfig(t *testing.T) {
	const pool = "inference-pool InferencePool llm-inference/qwen: "
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{name: "as rendered"},
		{name: "an unknown plugin type", old: "type: queue-scorer", new: "type: queue-scorr",
			want: []string{pool + `the configuration of its endpoint picker Deployment llm-inference/epp-qwen (/config/config.yaml) names plugin type "queue-scorr", which picker v1.5.0 does not register`,
				pool + `the configuration of its endpoint picker Deployment llm-inference/epp-qwen (/config/config.yaml) has profile default refer to plugin "queue-scorer", which its plugins do not define`}},
		{name: "a pluginRef to no plugin", old: "pluginRef: prefix,", new: "pluginRef: prefix-cache-scorer,",
			want: []string{pool + `the configuration of its endpoint picker Deployment llm-inference/epp-qwen (/config/config.yaml) has profile default refer to plugin "prefix-cache-scorer", which its plugins do not define`}},
		{name: "an unknown feature gate", old: "featureGates: [flowControl]", new: "featureGates: [flowcontrol]",
			want: []string{pool + `the configuration of its endpoint picker Deployment llm-inference/epp-qwen (/config/config.yaml) turns on feature gate "flowcontrol", which picker v1.5.0 does not know`,
				pool + "has objectives below priority 0, but its endpoint picker Deployment llm-inference/epp-qwen runs without feature gate flowControl"}},
		{name: "no flow control under batch objectives", old: "featureGates: [flowControl]", new: "featureGates: []",
			want: []string{pool + "has objectives below priority 0, but its endpoint picker Deployment llm-inference/epp-qwen runs without feature gate flowControl: a saturated pool drops them"}},
		{name: "a config file the ConfigMap lacks", old: "--config-file=/config/config.yaml", new: "--config-file=/config/epp.yaml",
			want: []string{pool + "its endpoint picker Deployment llm-inference/epp-qwen reads --config-file=/config/epp.yaml, but ConfigMap llm-inference/endpoint-picker mounted at /config has no key epp.yaml"}},
		{name: "a config file in no mounted directory", old: "--config-file=/config/config.yaml", new: "--config-file=/etc/epp/config.yaml",
			want: []string{pool + "its endpoint picker Deployment llm-inference/epp-qwen reads --config-file=/etc/epp/config.yaml, but no volume is mounted at /etc/epp"}},
		{name: "no --pool-name", old: "--pool-name=qwen, ", new: "",
			want: []string{pool + "its endpoint picker Deployment llm-inference/epp-qwen has no --pool-name"}},
		{name: "no --pool-namespace", old: "--pool-namespace=llm-inference, ", new: "",
			want: []string{pool + "its endpoint picker Deployment llm-inference/epp-qwen serves --pool-namespace=default (without the flag: env NAMESPACE, else default), not llm-inference"}},
		{name: "env NAMESPACE from the pod's namespace", old: "--pool-namespace=llm-inference, ", new: "",
			want: nil},
		{name: "a gRPC port the Service does not lead to", old: "--grpc-port=9002", new: "--grpc-port=9102",
			want: []string{pool + "its endpoint picker Service llm-inference/epp-qwen leads to container port 9002 of Deployment llm-inference/epp-qwen, but the picker listens for ext_proc on 9102 (--grpc-port)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := configuredPicker(t, goodPickerConfig)
			if tc.old != "" {
				require.Contains(t, m, tc.old)
				m = strings.Replace(m, tc.old, tc.new, 1)
			}
			if strings.HasPrefix(tc.name, "env NAMESPACE") {
				m = strings.Replace(m, "ports: [{name: grpc, containerPort: 9002}], volumeMounts:",
					"env: [{name: NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}], ports: [{name: grpc, containerPort: 9002}], volumeMounts:", 1)
			}
			assertViolations(t, tc.want, inferencePools(parseObjects(t, m)))
		})
	}
}

func TestInferenceRouteGroup(t *testing.T) {
	objs := parseObjects(t, fmt.Sprintf(pooled, "app.kubernetes.io/name: vllm-qwen", "epp-qwen", "{kind: InferencePool, name: qwen}"))
	assertViolations(t, []string{`inference-route HTTPRoute llm-inference/qwen: sends to kind InferencePool qwen in group "", not inference.networking.k8s.io`}, inferenceRoutes(objs))
}
