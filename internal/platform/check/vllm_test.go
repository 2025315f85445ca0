package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vllmDeployment is a vLLM Deployment serving /models/qwen/abc from the cache; replace its parts
// with strings.Replace to make the bad copies.
const vllmDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-qwen, namespace: llm-inference, annotations: {platform.llm/weights-revision: abc}}
spec:
  template:
    spec:
      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: accelerator, operator: In, values: [l40s]}]}]}}}
      initContainers:
        - {name: weights-ready, image: "vllm/vllm-openai:v0.30.0", command: [/bin/sh, -c, 'test -f "$WEIGHTS_MARKER"'], env: [{name: WEIGHTS_MARKER, value: /models/qwen/abc.ready}]}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.30.0@sha256:0123
          args: [--model=/models/qwen/abc, --dtype=auto, --disable-access-log-for-endpoints=/health,/metrics]
          readinessProbe: {httpGet: {path: /health, port: http}}`

const weightsJob = `apiVersion: batch/v1
kind: Job
metadata: {name: weights-sync-qwen, namespace: llm-inference}
spec: {template: {spec: {containers: [{name: sync, image: "amazon/aws-cli:2.15.0", env: [{name: MODEL_DIR, value: /models/qwen/abc}]}]}}}`

func TestVLLMWeights(t *testing.T) {
	cases := []struct {
		name string
		objs string
		want []string // one message substring per violation, in order; none = pass
	}{
		{"marker init container, filling Job, revision as declared", vllmDeployment + "\n---\n" + weightsJob, nil},
		{"no init container waits for the marker",
			strings.Replace(vllmDeployment, "/models/qwen/abc.ready", "/models/qwen/other.ready", 1) + "\n---\n" + weightsJob,
			[]string{"container vllm: no init container waits for /models/qwen/abc.ready"}},
		{"no Job fills the revision",
			vllmDeployment + "\n---\n" + strings.Replace(weightsJob, "/models/qwen/abc", "/models/qwen/old", 1),
			[]string{"no Job in llm-inference fills /models/qwen/abc"}},
		{"a Job in another namespace does not count",
			vllmDeployment + "\n---\n" + strings.Replace(weightsJob, "namespace: llm-inference", "namespace: llm-batch", 1),
			[]string{"no Job in llm-inference fills /models/qwen/abc"}},
		{"--model is not the declared revision",
			strings.Replace(vllmDeployment, "weights-revision: abc", "weights-revision: def", 1) + "\n---\n" + weightsJob,
			[]string{"--model=/models/qwen/abc is not the revision platform.llm/weights-revision declares (def)"}},
		{"a Hub model id is not served from the cache",
			strings.Replace(vllmDeployment, "--model=/models/qwen/abc", "--model=Qwen/Qwen2.5-7B-Instruct", 1), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := vllmWeights(parseObjects(t, tc.objs))
			require.Len(t, got, len(tc.want), "%v", got)
			for i, want := range tc.want {
				assert.Equal(t, "vllm-weights", got[i].Rule)
				assert.Equal(t, "Deployment llm-inference/vllm-qwen", got[i].Object)
				assert.Contains(t, got[i].Message, want)
			}
		})
	}
}

func TestVLLMDtype(t *testing.T) {
	card := func(c, dtype string) string {
		s := strings.Replace(vllmDeployment, "values: [l40s]", "values: ["+c+"]", 1)
		return strings.Replace(s, "--dtype=auto", "--dtype="+dtype, 1)
	}
	cases := []struct {
		name string
		obj  string
		want string // message substring; "" = pass
	}{
		{"auto on a bf16 card", card("l40s", "auto"), ""},
		{"float16 on a bf16 card", card("l40s", "float16"), "container vllm: --dtype=float16 on l40s, which does bf16"},
		{"half on a bf16 card", card("a100", "half"), "--dtype=half on a100"},
		{"float16 on a T4", card("t4", "float16"), ""},
		{"float16 where one allowed card lacks bf16", card("t4, l4", "float16"), ""},
		{"bfloat16 on a V100", card("nvidia-tesla-v100", "bfloat16"), "container vllm: --dtype=bfloat16 on nvidia-tesla-v100, which has no bf16"},
		{"card from the nodeSelector",
			strings.Replace(card("l40s", "float16"), "affinity:", "nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}\n      x-affinity:", 1),
			"on nvidia-l40s"},
		{"no card named", strings.Replace(card("l40s", "float16"), "key: accelerator", "key: zone", 1), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := vllmDtype(parseObjects(t, tc.obj))
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, "vllm-dtype", got[0].Rule)
			assert.Equal(t, "Deployment llm-inference/vllm-qwen", got[0].Object)
			assert.Contains(t, got[0].Message, tc.want)
		})
	}
}

func TestVLLMWarnings(t *testing.T) {
	cases := []struct {
		name  string
		obj   string
		rules []string
		want  []string
	}{
		{"digest and probe logs off", vllmDeployment, nil, nil},
		{"tag only: rule image-digest's", strings.Replace(vllmDeployment, "v0.30.0@sha256:0123", "v0.30.0", 1), nil, nil},
		{"probe path logged",
			strings.Replace(vllmDeployment, "=/health,/metrics", "=/metrics", 1),
			[]string{"vllm-access-log"}, []string{"every probe of /health is an access log line"}},
		{"all access logs off", strings.Replace(vllmDeployment, "--disable-access-log-for-endpoints=/health,/metrics", "--disable-uvicorn-access-log", 1), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := vllmWarnings(parseObjects(t, tc.obj))
			require.Len(t, got, len(tc.rules), "%v", got)
			for i := range tc.rules {
				assert.Equal(t, tc.rules[i], got[i].Rule)
				assert.Equal(t, "Deployment llm-inference/vllm-qwen", got[i].Object)
				assert.Contains(t, got[i].Message, tc.want[i])
			}
		})
	}
}
