package main

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/check"
)

// TestCheckAndCapacityKVAgree: auditor check and auditor capacity kv count the same sequences at
// --max-model-len, after the overhead, for the repository's vllm-qwen in prod: 13, prod's
// --max-num-seqs, which capacity kv passes (exit 0); one more fails it (exit 1).
func TestCheckAndCapacityKVAgree(t *testing.T) {
	src, err := render.FromDir("../..")
	require.NoError(t, err)
	prod, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	require.NoError(t, err)
	var use *check.KVCacheUse
	uses := check.KVCacheUses(prod.Objects)
	for i := range uses {
		if uses[i].Object == "Deployment llm-inference/vllm-qwen" {
			use = &uses[i]
		}
	}
	require.NotNil(t, use, "prod renders vllm-qwen")
	var cfg capacity.SeqsConfig
	for _, o := range prod.Objects {
		if o.GetKind() == "Deployment" && o.GetName() == "vllm-qwen" {
			cfg = check.SeqsConfigOf(o)
		}
	}
	v := cfg.VLLM
	kv := func(seqs int64) (capacity.KVResult, int) {
		out, err := runCapacity(t, "kv", "--layers", strconv.FormatInt(v.Model.Layers, 10), "--kv-heads", strconv.FormatInt(v.Model.KVHeads, 10),
			"--head-dim", strconv.FormatInt(v.Model.HeadDim, 10), "--dtype", v.Model.DType, "--context", strconv.FormatInt(v.MaxModelLen, 10),
			"--gpu-memory", strconv.FormatInt(v.GPUMemoryBytes, 10), "--weights-size", strconv.FormatInt(v.WeightsBytes, 10),
			"--gpu-memory-utilization", strconv.FormatFloat(v.GPUMemoryUtilization, 'g', -1, 64),
			"--max-num-seqs", strconv.FormatInt(seqs, 10), "-o", "json")
		var res capacity.KVResult
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		return res, exitCode(err)
	}
	res, code := kv(use.MaxNumSeqs)
	require.NotNil(t, res.VLLM)
	assert.Equal(t, use.FullLengthSeqs, res.VLLM.MaxFullLengthSeqs, "one count: check's and capacity kv's")
	assert.Equal(t, int64(13), use.FullLengthSeqs, "qwen on an L40S at 32768 tokens")
	assert.Equal(t, use.FullLengthSeqs, use.MaxNumSeqs, "prod's --max-num-seqs is what fits")
	assert.Equal(t, codeOK, code, "prod's --max-num-seqs %d fits the worst case", use.MaxNumSeqs)
	more, code := kv(use.MaxNumSeqs + 1)
	assert.False(t, more.VLLM.Fits)
	assert.Equal(t, codeFound, code, "one sequence more does not fit")
	gate, err := cfg.WithOverhead() // what rule capacity-kv-cache checks
	require.NoError(t, err)
	fit, err := capacity.CheckVLLM(gate)
	require.NoError(t, err)
	assert.Equal(t, *res.VLLM, fit, "the gate and capacity kv: one computation")
}
