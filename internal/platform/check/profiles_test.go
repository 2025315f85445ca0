package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// qwenProfile is the profile `auditor profile` measures of testfixture.QwenTraffic (its test
// measures it from a real Prometheus); here it is written from the fixture's own arrivals.
func qwenProfile(t *testing.T) []byte {
	t.Helper()
	tr := testfixture.QwenTraffic()
	p := &profile.Profile{Model: tr.Model, Service: tr.Service, From: tr.Start.UTC(), To: tr.End.UTC(), TimeZone: "Europe/Moscow",
		Tokens:  profile.Tokens{Prompt: profile.Quantiles{P50: 857.143, P95: 1875}, Response: profile.Quantiles{P50: 200, P95: 493.478}},
		TTFT:    profile.Quantiles{P50: 0.218, P95: 3.816},
		Replica: profile.Replica{RequestsPerSecond: tr.ServedPerPod, TokensPerSecond: tr.ServedPerPod * tr.Response.Mean, Samples: 576}}
	for at := tr.Start; at.Before(tr.End); at = at.Add(time.Hour) {
		p.Hourly = append(p.Hourly, testfixture.QwenArrivals(at))
		p.Queue = append(p.Queue, 0)
	}
	data, err := p.Marshal()
	require.NoError(t, err)
	return data
}

func writeFile(t *testing.T, dir, rel string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, rel), data, 0o644))
}

func TestCheckHoldsGitAgainstTheMeasuredProfile(t *testing.T) {
	dir, commit, _ := repoCopy(t)
	writeFile(t, dir, profile.Path("prod", "qwen"), qwenProfile(t))
	commit("profile of qwen")
	res := runCheck(t, dir)
	prod := envResult(t, res, "prod")

	var warnings []string
	for _, w := range prod.Warnings {
		if w.Rule == "traffic-profile" {
			assert.Equal(t, "clusters/prod/profiles/qwen.yaml", w.Object)
			warnings = append(warnings, w.Message)
		}
	}
	require.Len(t, warnings, 2, strings.Join(warnings, "\n"))
	assert.Contains(t, warnings[0], "ScaledObject llm-inference/vllm-qwen waits for 10 queued requests per replica; the profile of 2026-11-02 to 2026-11-30 asks for 4")
	assert.Contains(t, warnings[1], "found peak days-10-25-0900 (days 10, 25 of the month at 09:00 for 9h0m0s, warm 7")
	assert.Contains(t, warnings[1], "which clusters/prod/schedule.yaml lacks")
	for _, v := range prod.Violations {
		assert.NotEqual(t, "traffic-profile", v.Rule, v.Message)
	}

	// The measured p95 lengths size vLLM's batch: 1,875 + 494 tokens, in whole 16-token blocks.
	var qwen *KVCacheUse
	for i, u := range prod.KVCache {
		if u.Object == "Deployment llm-inference/vllm-qwen" {
			qwen = &prod.KVCache[i]
		}
	}
	require.NotNil(t, qwen)
	assert.Equal(t, "measured profile", qwen.Source)
	assert.Equal(t, int64(2384), qwen.SeqTokens)
	// Without a profile, staging sizes it from the annotations.
	for _, u := range envResult(t, res, "staging").KVCache {
		assert.Equal(t, "annotations", u.Source, u.Object)
	}
}

func TestCheckRejectsABrokenProfile(t *testing.T) {
	dir, commit, _ := repoCopy(t)
	writeFile(t, dir, profile.Path("prod", "qwen"), []byte("model: qwen\nhourlyRequestsPerSecond: [1, 2\n"))
	writeFile(t, dir, profile.Path("prod", "mistral"), []byte(strings.ReplaceAll(string(qwenProfile(t)), "model: qwen", "model: mistral")))
	commit("two bad profiles")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	got := map[string]string{}
	for _, v := range envResult(t, res, "prod").Violations {
		if v.Rule == "traffic-profile" {
			got[v.Object] = v.Message
		}
	}
	require.Len(t, got, 2, "%v", got)
	assert.Contains(t, got["clusters/prod/profiles/qwen.yaml"], "clusters/prod/profiles/qwen.yaml")
	assert.Contains(t, got["clusters/prod/profiles/mistral.yaml"], "no Deployment annotated platform.llm/model: mistral with a ScaledObject")
}

func envResult(t *testing.T, res *Result, env string) EnvResult {
	t.Helper()
	for _, e := range res.Envs {
		if e.Env == env {
			return e
		}
	}
	t.Fatalf("no env %s in the result", env)
	return EnvResult{}
}

// At the profile's peak (qwen's paydays: 7 replicas) prod's GPU workloads hold 9 GPUs, and the
// pool must keep room for one more node: a limit of 10 is enough, 9 is one node short.
func TestCheckGPUPoolSurvivesTheLossOfANodeAtThePeak(t *testing.T) {
	for _, tc := range []struct {
		limit string
		want  string // "" for no violation
	}{
		{"10", ""},
		{"9", "at the peak of clusters/prod/profiles/qwen.yaml the GPU workloads hold 9 GPUs (vllm-qwen 7×1 (peak days-10-25-0900) + vllm-llama 1×1 (minimum) + vllm-qwen-canary 1×1 (minimum)): 9 nodes of 1 GPUs, and one more to replace a lost one, is 10 GPUs, above the limit of 9: 1 GPU node(s) short"},
		{"7", "above the limit of 7: 3 GPU node(s) short"},
	} {
		t.Run("limit "+tc.limit, func(t *testing.T) {
			dir, commit, edit := repoCopy(t)
			writeFile(t, dir, profile.Path("prod", "qwen"), qwenProfile(t))
			edit("overlays/prod/capacity.yaml", `nvidia.com/gpu: "16"`, `nvidia.com/gpu: "`+tc.limit+`"`)
			commit("profile of qwen, GPU limit " + tc.limit)
			var got []string
			for _, v := range envResult(t, runCheck(t, dir), "prod").Violations {
				if v.Rule == "gpu-pool-n-plus-one" {
					assert.Equal(t, "NodePool gpu", v.Object)
					got = append(got, v.Message)
				}
			}
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Contains(t, got[0], tc.want)
		})
	}
}

// On nodes of four GPUs, whole nodes count: 7 GPUs take two nodes and a third replaces a lost
// one (12 GPUs of capacity); 9 take three, and the fourth is over a limit of 12.
func TestGPUPoolNPlusOneCountsWholeNodes(t *testing.T) {
	objs := parseObjects(t, `{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: gpu}, spec: {limits: {nvidia.com/gpu: "12"},
  template: {spec: {requirements: [{key: karpenter.k8s.aws/instance-gpu-count, operator: In, values: ["4"]}]}}}}
---
{apiVersion: apps/v1, kind: Deployment, metadata: {name: vllm-a, namespace: a}, spec: {replicas: 1, template: {spec: {containers: [{name: vllm, image: "x:1", resources: {limits: {nvidia.com/gpu: "1"}}}]}}}}
---
{apiVersion: apps/v1, kind: Deployment, metadata: {name: vllm-a, namespace: b}, spec: {replicas: 2, template: {spec: {containers: [{name: vllm, image: "x:1", resources: {limits: {nvidia.com/gpu: "1"}}}]}}}}
---
{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: vllm-a, namespace: b}, spec: {scaleTargetRef: {name: vllm-a}, minReplicaCount: 2}}`)
	// Only a/vllm-a has a profile; b/vllm-a, of the same name, runs at its minimum of 2.
	atPeak := func(n int64) map[string]peakLoad {
		return map[string]peakLoad{"a/vllm-a": {replicas: n, what: "peak p", file: "clusters/prod/profiles/a.yaml"}}
	}
	assert.Empty(t, gpuPoolNPlusOne(objs, atPeak(5)), "5 + 2 = 7 GPUs: 2 nodes, a third to spare, 12 GPUs")
	got := gpuPoolNPlusOne(objs, atPeak(7))
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Message, "hold 9 GPUs (vllm-a 7×1 (peak p) + vllm-a 2×1 (minimum)): 3 nodes of 4 GPUs, and one more to replace a lost one, is 16 GPUs, above the limit of 12: 1 GPU node(s) short")
}

// A profile of flat traffic supports none of prod's peaks on vllm-qwen; one whose replicas never
// saturated says nothing is held against it, rather than passing in silence.
func TestCheckWarnsOfWhatAProfileNoLongerSupports(t *testing.T) {
	flat := func(t *testing.T, perReplica float64) []byte {
		tr := testfixture.QwenTraffic()
		p := &profile.Profile{Model: tr.Model, Service: tr.Service, From: tr.Start.UTC(), To: tr.End.UTC(), TimeZone: "Europe/Moscow",
			Tokens: profile.Tokens{Prompt: profile.Quantiles{P50: 800, P95: 1500}, Response: profile.Quantiles{P50: 200, P95: 400}},
			TTFT:   profile.Quantiles{P50: 0.2, P95: 0.5}, Replica: profile.Replica{RequestsPerSecond: perReplica, Samples: 10}}
		for at := tr.Start; at.Before(tr.End); at = at.Add(time.Hour) {
			p.Hourly = append(p.Hourly, 1)
		}
		data, err := p.Marshal()
		require.NoError(t, err)
		return data
	}
	for _, tc := range []struct {
		name       string
		perReplica float64
		want       string
	}{
		{"flat traffic", 2, "schedule peak weekday-morning raises ScaledObject llm-inference/vllm-qwen to 4, but the profile of 2026-11-02 to 2026-11-30 found no peak it holds"},
		{"never saturated", 0, "no replica saturated in the window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, commit, _ := repoCopy(t)
			writeFile(t, dir, profile.Path("prod", "qwen"), flat(t, tc.perReplica))
			commit("a flat profile")
			var got []string
			for _, w := range envResult(t, runCheck(t, dir), "prod").Warnings {
				if w.Rule == "traffic-profile" {
					got = append(got, w.Message)
				}
			}
			assert.Contains(t, strings.Join(got, "\n"), tc.want)
		})
	}
}

// Pods are not split across nodes: 2-GPU pods on 3-GPU nodes take a node each.
func TestPackedNodes(t *testing.T) {
	for _, tc := range []struct {
		pods []int64
		size int64
		want int64
	}{
		{[]int64{2, 2, 2}, 3, 3},
		{[]int64{1, 1, 1, 1, 1, 1, 1}, 4, 2},
		{[]int64{1, 2, 1}, 3, 2},
		{[]int64{1, 1, 1}, 1, 3},
		{nil, 4, 0},
	} {
		assert.Equal(t, tc.want, packedNodes(tc.pods, tc.size), "%v on %d-GPU nodes", tc.pods, tc.size)
	}
}
