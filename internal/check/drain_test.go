package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVLLMDrain(t *testing.T) {
	pod := func(spec string) string {
		return `{apiVersion: apps/v1, kind: Deployment, metadata: {name: vllm-qwen, namespace: llm-inference}, spec: {template: {spec: ` + spec + `}}}`
	}
	cases := []struct {
		name string
		obj  string
		want string // message substring; "" = pass
	}{
		{"grace covers sleep and shutdown timeout",
			pod(`{terminationGracePeriodSeconds: 75, containers: [{name: vllm, image: "vllm/vllm-openai:v0.11.0", args: ["--shutdown-timeout=60"], lifecycle: {preStop: {exec: {command: [sleep, "15"]}}}}]}`), ""},
		{"grace below sleep + shutdown timeout",
			pod(`{terminationGracePeriodSeconds: 60, containers: [{name: vllm, image: "vllm/vllm-openai:v0.11.0", args: ["--port=8000", "--shutdown-timeout", "60"], lifecycle: {preStop: {exec: {command: [sleep, "15"]}}}}]}`),
			"container vllm: terminationGracePeriodSeconds 60 is below the 75s vLLM needs to drain (preStop exec sleep 15s + --shutdown-timeout 60s)"},
		{"default grace period is 30",
			pod(`{containers: [{name: vllm, image: "registry.example.com/mirror/vllm-openai@sha256:abc", lifecycle: {preStop: {sleep: {seconds: 45}}}}]}`),
			"terminationGracePeriodSeconds 30 is below the 45s vLLM needs to drain (preStop sleep action 45s + no --shutdown-timeout 0s)"},
		{"shell script sleeps are summed",
			pod(`{terminationGracePeriodSeconds: 20, containers: [{name: vllm, image: "vllm/vllm-openai:v0.11.0", lifecycle: {preStop: {exec: {command: ["/bin/sh", "-c", "sleep 10; curl -X POST localhost:8000/drain && sleep 15s"]}}}}]}`),
			"below the 25s"},
		{"shutdown timeout in the command",
			pod(`{terminationGracePeriodSeconds: 30, containers: [{name: vllm, image: "vllm/vllm-openai:v0.11.0", command: [vllm, serve, /models/q, --shutdown-timeout=40]}]}`),
			"(preStop sleep 0s + --shutdown-timeout 40s)"},
		{"not a vLLM image", pod(`{terminationGracePeriodSeconds: 1, containers: [{name: api, image: "registry.example.com:5000/llm/rag-api:1.4.2", args: ["--shutdown-timeout=60"]}]}`), ""},
		{"a registry port is not a tag", pod(`{terminationGracePeriodSeconds: 1, containers: [{name: vllm, image: "vllm.example.com:5000/serving", args: ["--shutdown-timeout=60"]}]}`), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := vllmDrain(parseObjects(t, tc.obj))
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, "vllm-drain", got[0].Rule)
			assert.Equal(t, "Deployment llm-inference/vllm-qwen", got[0].Object)
			assert.Contains(t, got[0].Message, tc.want)
		})
	}
}
