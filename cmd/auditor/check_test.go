package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/platform/check"
)

// TestWriteCheckShowsWarnings: a warning is printed beside the violations in both formats, and
// does not fail the check.
func TestWriteCheckShowsWarnings(t *testing.T) {
	res := &check.Result{Base: "aaa", Head: "bbb", Passed: true, Envs: []check.EnvResult{{Env: "prod",
		Warnings: []check.Violation{{Rule: "capacity-kv", Object: "Deployment llm-inference/vllm-qwen", Message: "KV cache uses 61%"}}}}}
	for _, tc := range []struct {
		md   bool
		want string
	}{
		{false, "  WARNING capacity-kv Deployment llm-inference/vllm-qwen: KV cache uses 61%"},
		{true, "- :warning: **capacity-kv** `Deployment llm-inference/vllm-qwen`: KV cache uses 61%"},
	} {
		var b strings.Builder
		writeCheck(&b, res, checkView{md: tc.md, verbose: true})
		assert.Contains(t, b.String(), tc.want)
		assert.Contains(t, b.String(), "PASS")
	}
}

// TestWriteCheckShowsSecurity: each env's section lists what its namespaces enforce, "none" for
// what is missing.
func TestWriteCheckShowsSecurity(t *testing.T) {
	res := &check.Result{Base: "aaa", Head: "bbb", Passed: false, Envs: []check.EnvResult{{Env: "prod",
		Security: []check.NamespaceSecurity{
			{Namespace: "llm-api", PodSecurity: "restricted:v1.37", DefaultDeny: "default-deny", DNS: "allow-dns"},
			{Namespace: "llm-rag"},
		}}}}
	for _, tc := range []struct {
		md   bool
		want []string
	}{
		{false, []string{"  SECURITY llm-api pod-security=restricted:v1.37 default-deny=default-deny dns=allow-dns",
			"  SECURITY llm-rag pod-security=none default-deny=none dns=none"}},
		{true, []string{"| namespace | Pod Security (enforce) | default deny | DNS egress |",
			"| `llm-api` | restricted:v1.37 | default-deny | allow-dns |", "| `llm-rag` | none | none | none |"}},
	} {
		var b strings.Builder
		writeCheck(&b, res, checkView{md: tc.md, verbose: true})
		for _, w := range tc.want {
			assert.Contains(t, b.String(), w)
		}
	}
}

// TestWriteCheckShowsGPUPools: each env's section lists its GPU NodePools' node class, root, AMI,
// budgets and expiry.
func TestWriteCheckShowsGPUPools(t *testing.T) {
	res := &check.Result{Base: "aaa", Head: "bbb", Passed: true, Envs: []check.EnvResult{{Env: "prod",
		GPUPools: []check.GPUPool{
			{Pool: "gpu", NodeClass: "gpu", RootVolume: "200Gi on /dev/xvda", AMI: "al2023@v20260714",
				Budgets: []string{"1 nodes", `0 nodes from "0 5 * * 1-5" for 14h (Empty, Drifted, Underutilized)`}, ExpireAfter: "Never"},
			{Pool: "old", NodeClass: "default (not rendered)", Budgets: []string{}, ExpireAfter: "720h (default)"},
		}}}}
	for _, tc := range []struct {
		md   bool
		want []string
	}{
		{false, []string{`  GPU-POOL gpu node-class=gpu root=200Gi on /dev/xvda ami=al2023@v20260714 budgets=1 nodes; 0 nodes from "0 5 * * 1-5" for 14h (Empty, Drifted, Underutilized) expireAfter=Never`,
			"  GPU-POOL old node-class=default (not rendered) root=none ami=none budgets=none expireAfter=720h (default)"}},
		{true, []string{"| GPU NodePool | node class | root volume | AMI | disruption budgets (UTC) | expireAfter |",
			"| `gpu` | gpu | 200Gi on /dev/xvda | al2023@v20260714 | 1 nodes; 0 nodes from \"0 5 * * 1-5\" for 14h (Empty, Drifted, Underutilized) | Never |"}},
	} {
		var b strings.Builder
		writeCheck(&b, res, checkView{md: tc.md, verbose: true})
		for _, w := range tc.want {
			assert.Contains(t, b.String(), w)
		}
	}
}

// TestWriteCheckQuiet: without --verbose, check lists the warnings on objects the change touches,
// counts the others and the inherited violations by rule, leaves the inventory out, and wraps
// every line at the width; --verbose lists everything.
func TestWriteCheckQuiet(t *testing.T) {
	long := strings.Repeat("a long explanation of the finding ", 8)
	res := &check.Result{Base: "aaa", Head: "bbb", Passed: true, Envs: []check.EnvResult{{Env: "prod",
		Changes: []check.Change{{Kind: "Deployment", Namespace: "llm-inference", Name: "vllm-qwen", Change: "changed"}},
		Warnings: []check.Violation{
			{Rule: "vllm-max-num-seqs", Object: "Deployment llm-inference/vllm-qwen", Message: "under-sized: " + long},
			{Rule: "vllm-max-num-seqs", Object: "Deployment llm-inference/vllm-llama", Message: "under-sized"},
			{Rule: "namespace-pod-security", Object: "Namespace llm-monitoring", Message: "privileged"},
		},
		Inherited: []check.Violation{{Rule: "job-sync-again", Object: "Job a", Message: "x"}, {Rule: "job-sync-again", Object: "Job b", Message: "x"}},
		Security:  []check.NamespaceSecurity{{Namespace: "llm-api"}},
	}}}
	var quiet strings.Builder
	writeCheck(&quiet, res, checkView{width: 80})
	out := quiet.String()
	joined := strings.ReplaceAll(out, "\n    ", " ") // the wrapped lines, unwrapped
	assert.Contains(t, out, "  WARNING vllm-max-num-seqs Deployment llm-inference/vllm-qwen: under-sized:")
	assert.NotContains(t, out, "vllm-llama")
	assert.Contains(t, joined, "2 more warnings, on what this change leaves alone (vllm-max-num-seqs, namespace-pod-security)")
	assert.Contains(t, joined, "2 inherited violations, broken before this change (job-sync-again ×2); --verbose lists them")
	assert.NotContains(t, out, "SECURITY")
	for _, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 80, line)
	}

	var verbose strings.Builder
	writeCheck(&verbose, res, checkView{verbose: true, width: 80})
	for _, want := range []string{"  WARNING vllm-max-num-seqs (2):", "    Deployment llm-inference/vllm-llama: under-sized",
		"  WARNING namespace-pod-security Namespace llm-monitoring: privileged", "  INHERITED job-sync-again (2):", "  SECURITY llm-api"} {
		assert.Contains(t, verbose.String(), want)
	}
}

// TestWrap: lines break at spaces within the width, the rest indented; a word longer than the
// width stays whole; 0 does not wrap.
func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"  short", 20, "  short\n"},
		{"  one two three four five", 12, "  one two\n    three\n    four\n    five\n"},
		{"  averyveryverylongword x", 10, "  averyveryverylongword\n    x\n"},
		{"  one two three four five", 0, "  one two three four five\n"},
	} {
		assert.Equal(t, tc.want, wrap(tc.in, tc.width, "    "), tc.in)
	}
}
