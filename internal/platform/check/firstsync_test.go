package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFirstSyncSplits(t *testing.T) {
	route := func(wave, canaryWeight string) string {
		return `{apiVersion: gateway.networking.k8s.io/v1, kind: HTTPRoute, metadata: {name: qwen, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "` + wave + `"}},
  spec: {rules: [{backendRefs: [{name: vllm-qwen, port: 8000, weight: 90}, {name: vllm-qwen-canary, port: 8000` + canaryWeight + `}]}]}}`
	}
	workload := func(name, wave string) string {
		return `{apiVersion: apps/v1, kind: Deployment, metadata: {name: ` + name + `, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "` + wave + `"}},
  spec: {template: {metadata: {labels: {app.kubernetes.io/name: ` + name + `}}, spec: {containers: [{name: vllm}]}}}}
---
{apiVersion: v1, kind: Service, metadata: {name: ` + name + `, namespace: llm-inference}, spec: {selector: {app.kubernetes.io/name: ` + name + `}}}`
	}
	cases := []struct {
		name   string
		stream []string
		want   []string
	}{
		{"canary and its 90/10 route in one wave (issue 31)",
			[]string{route("1", ", weight: 10"), workload("vllm-qwen", "0"), workload("vllm-qwen-canary", "1")},
			[]string{"HTTPRoute llm-inference/qwen (sync wave 1) sends weight 10 to Service llm-inference/vllm-qwen-canary, whose pods come from Deployment llm-inference/vllm-qwen-canary (sync wave 1)"}},
		{"the split a wave after both Deployments", []string{route("2", ", weight: 10"), workload("vllm-qwen", "1"), workload("vllm-qwen-canary", "1")}, nil},
		{"weight 0 sends nothing", []string{route("1", ", weight: 0"), workload("vllm-qwen", "0"), workload("vllm-qwen-canary", "1")}, nil},
		{"an unset weight is 1",
			[]string{route("1", ""), workload("vllm-qwen", "0"), workload("vllm-qwen-canary", "3")},
			[]string{"sends weight 1 to Service llm-inference/vllm-qwen-canary, whose pods come from Deployment llm-inference/vllm-qwen-canary (sync wave 3)"}},
		{"a single backend is not a split", []string{
			`{apiVersion: gateway.networking.k8s.io/v1, kind: HTTPRoute, metadata: {name: qwen, namespace: llm-inference}, spec: {rules: [{backendRefs: [{name: vllm-qwen, port: 8000}]}]}}`,
			workload("vllm-qwen", "0")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := firstSyncSplits(parseObjects(t, strings.Join(tc.stream, "\n---\n")))
			require.Len(t, got, len(tc.want), "%+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "first-sync", got[i].Rule)
				assert.Equal(t, "HTTPRoute llm-inference/qwen", got[i].Object)
				assert.Contains(t, got[i].Message, w)
			}
		})
	}
}

// TestCheckFirstSyncCanary puts the canary's split back into the Deployments' wave (issue 31):
// prod fails naming the route, once for each share (the stable's pods are cold on a fresh cluster
// too).
func TestCheckFirstSyncCanary(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("overlays/prod/canary/route-split.yaml", `argocd.argoproj.io/sync-wave: "2"`, `argocd.argoproj.io/sync-wave: "1"`)
	commit("split in the canary's wave")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	got := violations(res.Envs[0], "first-sync")
	require.Len(t, got, 2, "%+v", res.Envs[0].Violations)
	var msgs []string
	for _, v := range got {
		assert.Equal(t, "HTTPRoute llm-inference/qwen", v.Object)
		msgs = append(msgs, v.Message)
	}
	all := strings.Join(msgs, "\n")
	assert.Contains(t, all, "sends weight 10 to InferencePool llm-inference/qwen-canary, whose pods come from Deployment llm-inference/vllm-qwen-canary (sync wave 1)")
	assert.Contains(t, all, "sends weight 90 to InferencePool llm-inference/qwen, whose pods come from Deployment llm-inference/vllm-qwen (sync wave 1)")
}
