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
		want []string // one message substring per violation, in order; none = pass
	}{
		{"grace covers sleep and shutdown timeout",
			pod(`{terminationGracePeriodSeconds: 75, containers: [{name: vllm, image: "vllm/vllm-openai:v0.30.0", args: ["--shutdown-timeout=60"], lifecycle: {preStop: {exec: {command: [sleep, "15"]}}}}]}`), nil},
		{"grace below sleep + shutdown timeout",
			pod(`{terminationGracePeriodSeconds: 60, containers: [{name: vllm, image: "vllm/vllm-openai:v0.30.0", args: ["--port=8000", "--shutdown-timeout", "60"], lifecycle: {preStop: {exec: {command: [sleep, "15"]}}}}]}`),
			[]string{"container vllm: terminationGracePeriodSeconds 60 is below the 75s vLLM needs to drain (preStop exec sleep 15s + --shutdown-timeout 60s)"}},
		{"no shutdown timeout: aborts in flight, and the default grace period is 30",
			pod(`{containers: [{name: vllm, image: "registry.example.com/mirror/vllm-openai@sha256:abc", lifecycle: {preStop: {sleep: {seconds: 45}}}}]}`),
			[]string{"container vllm: no --shutdown-timeout: vLLM aborts the requests in flight on SIGTERM",
				"terminationGracePeriodSeconds 30 is below the 45s vLLM needs to drain (preStop sleep action 45s + no --shutdown-timeout 0s)"}},
		{"shutdown timeout 0 aborts",
			pod(`{terminationGracePeriodSeconds: 60, containers: [{name: vllm, image: "vllm/vllm-openai:v0.30.0", args: ["--shutdown-timeout=0"]}]}`),
			[]string{"--shutdown-timeout: vLLM aborts the requests in flight"}},
		{"a release before v0.18 has no --shutdown-timeout",
			pod(`{terminationGracePeriodSeconds: 90, containers: [{name: vllm, image: "vllm/vllm-openai:v0.11.0", args: ["--shutdown-timeout=60"]}]}`),
			[]string{"container vllm: image vllm/vllm-openai:v0.11.0 predates --shutdown-timeout (vLLM v0.18)"}},
		{"a suffixed release tag is read", pod(`{terminationGracePeriodSeconds: 90, containers: [{name: vllm, image: "vllm/vllm-openai:v0.18.1-cu129", args: ["--shutdown-timeout=60"]}]}`), nil},
		{"shell script sleeps are summed",
			pod(`{terminationGracePeriodSeconds: 20, containers: [{name: vllm, image: "vllm/vllm-openai:v0.30.0", args: ["--shutdown-timeout=1"], lifecycle: {preStop: {exec: {command: ["/bin/sh", "-c", "sleep 10; curl -X POST localhost:8000/drain && sleep 15s"]}}}}]}`),
			[]string{"below the 26s"}},
		{"shutdown timeout in the command",
			pod(`{terminationGracePeriodSeconds: 30, containers: [{name: vllm, image: "vllm/vllm-openai:v0.30.0", command: [vllm, serve, /models/q, --shutdown-timeout=40]}]}`),
			[]string{"(preStop sleep 0s + --shutdown-timeout 40s)"}},
		{"not a vLLM image", pod(`{terminationGracePeriodSeconds: 1, containers: [{name: api, image: "registry.example.com:5000/llm/rag-api:1.4.2", args: ["--shutdown-timeout=60"]}]}`), nil},
		{"a registry port is not a tag", pod(`{terminationGracePeriodSeconds: 1, containers: [{name: vllm, image: "vllm.example.com:5000/serving", args: ["--shutdown-timeout=60"]}]}`), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := vllmDrain(parseObjects(t, tc.obj))
			require.Len(t, got, len(tc.want))
			for i, want := range tc.want {
				assert.Equal(t, "vllm-drain", got[i].Rule)
				assert.Equal(t, "Deployment llm-inference/vllm-qwen", got[i].Object)
				assert.Contains(t, got[i].Message, want)
			}
		})
	}
}

func TestImageVersion(t *testing.T) {
	cases := []struct {
		image string
		want  vllmRelease
		ok    bool
	}{
		{"vllm/vllm-openai:v0.30.0", vllmRelease{0, 30}, true},
		{"vllm/vllm-openai:0.18.1", vllmRelease{0, 18}, true},
		{"vllm/vllm-openai:v0.28.0-cu129@sha256:abc", vllmRelease{0, 28}, true},
		{"vllm/vllm-openai@sha256:abc", vllmRelease{}, false},
		{"vllm/vllm-openai:latest", vllmRelease{}, false},
		{"vllm.example.com:5000/serving", vllmRelease{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			got, ok := imageVersion(tc.image)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}
