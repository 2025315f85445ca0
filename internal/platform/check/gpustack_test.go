package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

const (
	headDigest = "sha256:8a69ffad015f138d7170c4ddc429e230a3bc1c1719f67e14324749df200a4b90"
	newDigest  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	oldAMI     = "al2023@v20250301"
)

// stated rewrites env's stated triple in clusters/gpu-stack.yaml.
func stated(edit func(rel, old, new string), env, ami, image string) {
	line := "  " + env + `: {ami: al2023@v20260714, image: "` + headDigest + `", gpuOperator: v26.7.0}`
	edit(gpustack.File, line, "  "+env+": {ami: "+ami+`, image: "`+image+`", gpuOperator: v26.7.0}`)
}

// TestCheckGPUStackNegatives breaks the triple in a copy of the repository: each change fails
// auditor check in the envs it reaches, naming the object and the fix.
func TestCheckGPUStackNegatives(t *testing.T) {
	cases := []struct {
		name string
		do   func(edit func(rel, old, new string))
		rule string
		want map[string][]string // env → messages' substrings, one per violation of rule
	}{
		{"an AMI whose driver is below the image's CUDA", func(edit func(rel, old, new string)) {
			edit(gpustack.File, "amis:\n", "amis:\n  - {alias: "+oldAMI+", driver: \"570.124.06\", source: test}\n")
			edit("base/node-pools/nodeclass-gpu.yaml", "alias: al2023@v20260714", "alias: "+oldAMI)
			for _, env := range []string{"dev", "staging", "prod"} {
				stated(edit, env, oldAMI, headDigest)
			}
		}, "gpu-stack", map[string][]string{
			"dev": {"Deployment llm-inference/vllm-llama: image sha256:8a69ffad015f needs CUDA 13.0, but AMI al2023@v20250301 of EC2NodeClass gpu (NodePool gpu) ships driver 570.124.06, below 580 (NVIDIA's minimum, minor-version compatibility)",
				"vllm-qwen: image"},
			"staging": {"vllm-llama: image", "vllm-qwen: image"},
			"prod":    {"vllm-llama: image", "vllm-qwen: image", "vllm-qwen-canary: image sha256:8a69ffad015f needs CUDA 13.0, but AMI al2023@v20250301"}}},
		{"an image digest with no known CUDA", func(edit func(rel, old, new string)) {
			edit("overlays/prod/kustomization.yaml", "digest: "+headDigest, "digest: "+newDigest)
			stated(edit, "prod", "al2023@v20260714", newDigest)
		}, "gpu-stack", map[string][]string{"dev": nil, "staging": nil, "prod": {
			"Deployment llm-inference/vllm-llama: image vllm/vllm-openai:v0.30.0@" + newDigest + " has no known CUDA: add its digest to clusters/gpu-stack.yaml",
			"Deployment llm-inference/vllm-qwen: image", "Deployment llm-inference/vllm-qwen-canary: image"}}},
		{"an AMI changed without its stated triple", func(edit func(rel, old, new string)) {
			edit(gpustack.File, "amis:\n", "amis:\n  - {alias: al2023@v20261101, driver: \"580.200.01\", source: test}\n")
			edit("base/node-pools/nodeclass-gpu.yaml", "alias: al2023@v20260714", "alias: al2023@v20261101")
		}, "gpu-stack", map[string][]string{"dev": {"EC2NodeClass gpu (NodePool gpu) pins AMI al2023@v20261101, but clusters/gpu-stack.yaml states al2023@v20260714 for dev: a change of one part of the triple states the whole triple"},
			"staging": {"states al2023@v20260714 for staging"}, "prod": {"states al2023@v20260714 for prod"}}},
		{"the GPU Operator's driver left to the chart's default (enabled)", func(edit func(rel, old, new string)) {
			edit("apps/common/gpu-operator.yaml", "        driver:\n          enabled: false\n", "")
		}, "gpu-stack", map[string][]string{"dev": {"the GPU Operator installs its own driver"}}},
		{"a triple changed in prod's overlay that staging never ran", func(edit func(rel, old, new string)) {
			edit(gpustack.File, "images:\n", "images:\n  - {image: vllm/vllm-openai:v0.31.0, digest: \""+newDigest+"\", cuda: \"13.0\", source: test}\n")
			edit("overlays/prod/kustomization.yaml", "digest: "+headDigest, "digest: "+newDigest)
			stated(edit, "prod", "al2023@v20260714", newDigest)
		}, "gpu-stack-staged", map[string][]string{"dev": nil, "staging": nil, "prod": {
			"prod would run AMI al2023@v20260714 (driver 580.159.03), image sha256:111111111111 (CUDA 13.0), GPU Operator v26.7.0, which staging does not run"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, commit, edit := repoCopy(t)
			tc.do(edit)
			commit(tc.name)
			res := runCheck(t, dir)
			assert.False(t, res.Passed)
			for _, env := range res.Envs {
				want, ok := tc.want[env.Env]
				if !ok {
					continue
				}
				var got []string
				for _, v := range env.Violations {
					if v.Rule == tc.rule {
						got = append(got, v.Message)
						t.Logf("%s: %s", env.Env, v.Message)
					}
				}
				require.Len(t, got, len(want), "%s: %q", env.Env, got)
				for i := range want {
					assert.Contains(t, got[i], want[i], env.Env)
				}
			}
		})
	}
}

// TestCheckGPUStackOnHead: the repository's triple passes in every env, each env's check says
// which triple it runs, and a staged AMI change names the NodePool Karpenter replaces by drift
// and its disruption budgets.
func TestCheckGPUStackOnHead(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit(gpustack.File, "amis:\n", "amis:\n  - {alias: al2023@v20261101, driver: \"580.200.01\", source: test}\n")
	edit("base/node-pools/nodeclass-gpu.yaml", "alias: al2023@v20260714", "alias: al2023@v20261101")
	for _, env := range []string{"dev", "staging", "prod"} {
		stated(edit, env, "al2023@v20261101", headDigest)
	}
	commit("a new AMI, everywhere")
	res := runCheck(t, dir)
	for _, env := range res.Envs {
		for _, v := range env.Violations {
			assert.False(t, strings.HasPrefix(v.Rule, "gpu-stack"), "%s: %+v", env.Env, v)
		}
		require.NotNil(t, env.GPUStack, env.Env)
		assert.Equal(t, gpustack.Triple{AMI: "al2023@v20261101", Driver: "580.200.01", Image: headDigest, CUDA: "13.0", GPUOperator: "v26.7.0"}, *env.GPUStack, env.Env)
		var drift []string
		for _, w := range env.Warnings {
			if w.Rule == "gpu-stack-drift" {
				drift = append(drift, w.Message)
			}
		}
		assert.Equal(t, []string{`NodePool gpu: its AMI moves al2023@v20260714 → al2023@v20261101, so Karpenter replaces every node of the pool by drift, within its disruption budgets (1 nodes; 0 nodes from "0 5 * * 1-5" for 14h (Empty, Drifted, Underutilized)); each vLLM replica there cold-starts on a new node, launched while the old one still counts against the pool's limit (rule gpu-pool-n-plus-one)`}, drift, env.Env)
	}
}
