package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// parseObjects reads a YAML stream of objects.
func parseObjects(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(stream, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		// through JSON, as the renderer's objects: integers are int64, not float64
		js, err := yaml.YAMLToJSON([]byte(doc))
		require.NoError(t, err, doc)
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(js), doc)
		out = append(out, u)
	}
	return out
}

const waveGateway = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: llm-gateway, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "%s"}}
spec: {gatewayClassName: istio, listeners: [{name: http, port: 80, protocol: HTTP}]}`

const waveRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: rag-api, namespace: llm-api, annotations: {argocd.argoproj.io/sync-wave: "%s"}}
spec:
  parentRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: llm-gateway, namespace: llm-inference}]
  rules: [{backendRefs: [{name: rag-api, port: 80}]}]`

const waveWorkload = `apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "0"}}
spec:
  template:
    spec:
      serviceAccountName: vllm
      priorityClassName: llm-interactive
      containers:
        - name: vllm
          envFrom: [{configMapRef: {name: vllm-env}}]
          env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: hf-token, key: token}}}]
      volumes:
        - {name: models, persistentVolumeClaim: {claimName: model-cache}}
        - {name: config, configMap: {name: vllm-config}}`

func obj(kind, apiVersion, ns, name, wave string) string {
	meta := "name: " + name
	if ns != "" {
		meta += ", namespace: " + ns
	}
	if wave != "" {
		meta += `, annotations: {argocd.argoproj.io/sync-wave: "` + wave + `"}`
	}
	return "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata: {" + meta + "}"
}

func TestWaveOrder(t *testing.T) {
	sprintf := func(tmpl, wave string) string { return strings.Replace(tmpl, "%s", wave, 1) }
	cases := []struct {
		name   string
		stream []string
		want   []string // substrings, one per expected violation message
	}{
		{
			name:   "HTTPRoute in wave 0 before its Gateway in wave 1 (issue #15)",
			stream: []string{sprintf(waveRoute, "0"), sprintf(waveGateway, "1")},
			want:   []string{"HTTPRoute llm-api/rag-api (sync wave 0) needs Gateway llm-inference/llm-gateway (sync wave 1, its parentRef)"},
		},
		{
			name:   "Gateway before the route passes",
			stream: []string{sprintf(waveRoute, "0"), sprintf(waveGateway, "-1")},
		},
		{
			name:   "same wave passes: Argo CD applies a whole wave before it waits",
			stream: []string{sprintf(waveRoute, "1"), sprintf(waveGateway, "1")},
		},
		{
			name:   "route backend Service in a later wave",
			stream: []string{sprintf(waveRoute, "0"), obj("Service", "v1", "llm-api", "rag-api", "2")},
			want:   []string{"needs Service llm-api/rag-api (sync wave 2, its backendRef)"},
		},
		{
			name: "workload needs claim, ConfigMaps, Secret, ServiceAccount, PriorityClass of later waves",
			stream: []string{waveWorkload,
				obj("PersistentVolumeClaim", "v1", "llm-inference", "model-cache", "1"),
				obj("ConfigMap", "v1", "llm-inference", "vllm-config", "1"),
				obj("ConfigMap", "v1", "llm-inference", "vllm-env", "1"),
				obj("Secret", "v1", "llm-inference", "hf-token", "1"),
				obj("ServiceAccount", "v1", "llm-inference", "vllm", "1"),
				obj("PriorityClass", "scheduling.k8s.io/v1", "", "llm-interactive", "1")},
			want: []string{
				"needs ServiceAccount llm-inference/vllm (sync wave 1, its pods' serviceAccountName)",
				"needs PriorityClass llm-interactive (sync wave 1, its pods' priorityClassName)",
				"needs PersistentVolumeClaim llm-inference/model-cache (sync wave 1, volume models)",
				"needs ConfigMap llm-inference/vllm-config (sync wave 1, volume config)",
				"needs ConfigMap llm-inference/vllm-env (sync wave 1, envFrom of container vllm)",
				"needs Secret llm-inference/hf-token (sync wave 1, env TOKEN of container vllm)",
			},
		},
		{
			name:   "references to objects not rendered are not this rule's business",
			stream: []string{waveWorkload},
		},
		{
			name: "StatefulSet volumeClaimTemplates are made by the controller",
			stream: []string{`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: qdrant, namespace: llm-rag}
spec:
  template: {spec: {containers: [{name: qdrant, volumeMounts: [{name: storage, mountPath: /q}]}]}}
  volumeClaimTemplates: [{metadata: {name: storage}}]`,
				obj("PersistentVolumeClaim", "v1", "llm-rag", "storage-qdrant-0", "3")},
		},
		{
			name: "ScaledObject and HPA need their scale target",
			stream: []string{
				`{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: vllm, namespace: llm-inference}, spec: {scaleTargetRef: {name: vllm}}}`,
				`{apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler, metadata: {name: api, namespace: llm-api}, spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}}}`,
				obj("Deployment", "apps/v1", "llm-inference", "vllm", "1"),
				obj("Deployment", "apps/v1", "llm-api", "api", "1")},
			want: []string{
				"ScaledObject llm-inference/vllm (sync wave 0) needs Deployment llm-inference/vllm (sync wave 1, its scaleTargetRef)",
				"HorizontalPodAutoscaler llm-api/api (sync wave 0) needs Deployment llm-api/api (sync wave 1, its scaleTargetRef)",
			},
		},
		{
			name: "NodePool needs its node class",
			stream: []string{
				`{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: gpu, annotations: {argocd.argoproj.io/sync-wave: "-2"}}, spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}}`,
				obj("EC2NodeClass", "karpenter.k8s.aws/v1", "", "default", "0")},
			want: []string{"NodePool gpu (sync wave -2) needs EC2NodeClass default (sync wave 0, its nodeClassRef)"},
		},
		{
			name:   "namespaced object needs its Namespace",
			stream: []string{obj("ConfigMap", "v1", "llm-rag", "c", "-1"), obj("Namespace", "v1", "", "llm-rag", "0")},
			want:   []string{"ConfigMap llm-rag/c (sync wave -1) needs Namespace llm-rag (sync wave 0, its namespace)"},
		},
		{
			name:   "hooks are outside the waves",
			stream: []string{`{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: llm-rag, annotations: {argocd.argoproj.io/hook: PreSync, argocd.argoproj.io/sync-wave: "-5"}}}`, obj("Namespace", "v1", "", "llm-rag", "0")},
		},
		{
			name:   "a wave that is not an integer",
			stream: []string{obj("ConfigMap", "v1", "llm-rag", "c", "1.0")},
			want:   []string{`argocd.argoproj.io/sync-wave="1.0" is not an integer`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := waveOrder(parseObjects(t, strings.Join(tc.stream, "\n---\n")))
			require.Len(t, got, len(tc.want), "violations: %+v", got)
			var msgs []string
			for _, v := range got {
				assert.Equal(t, "sync-wave-order", v.Rule)
				msgs = append(msgs, v.Message)
			}
			all := strings.Join(msgs, "\n")
			for _, w := range tc.want {
				assert.Contains(t, all, w)
			}
		})
	}
}
