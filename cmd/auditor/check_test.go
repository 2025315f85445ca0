package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/check"
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
