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
		writeCheck(&b, res, tc.md)
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
		writeCheck(&b, res, tc.md)
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
		writeCheck(&b, res, tc.md)
		for _, w := range tc.want {
			assert.Contains(t, b.String(), w)
		}
	}
}
