package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/capacity"
)

// kvOptions are the flags of `auditor capacity kv`.
type kvOptions struct {
	model                          capacity.Model
	context                        int64
	freeMemory, gpuMemory, weights string
	utilization                    float64
	maxNumSeqs, batched            int64
	output                         string
	vllm                           bool // the vLLM check was asked for
}

func newCapacityKVCommand() *cobra.Command {
	o := &kvOptions{}
	cmd := &cobra.Command{
		Use:   "kv --layers N --kv-heads N --head-dim N --context TOKENS [--dtype fp16] [--free-memory SIZE | --gpu-memory SIZE --weights-size SIZE --max-num-seqs N]",
		Short: "KV cache per token and per conversation, and how many conversations fit",
		Long: `kv computes the KV cache of a model: 2 × layers × KV heads × head dim × bytes per value per
token, times --context tokens per conversation, and how many such conversations fit in
--free-memory.

With --gpu-memory, --weights-size and --max-num-seqs it checks a vLLM configuration instead
(--context is then --max-model-len): --max-num-seqs sequences at --max-model-len must fit in
gpu-memory × --gpu-memory-utilization − weights − vLLM's activation and CUDA graph overhead (an
estimate: 1 GiB + 1 MiB per batched token, --max-num-batched-tokens); exit code 1 when they do
not. auditor check (rule capacity-kv-cache) counts the same.

Without the vLLM check, exit code 1 when no conversation fits in --free-memory.

Sizes: 10Gi, 10GiB, 16GB, 16G or a byte count.`,
		Example: `  auditor capacity kv --layers 32 --kv-heads 8 --head-dim 128 --dtype fp16 --context 8000 --free-memory 10GiB
  auditor capacity kv --layers 32 --kv-heads 8 --head-dim 128 --context 16384 \
      --gpu-memory 48305799168 --weights-size 16060522496 --gpu-memory-utilization 0.9 --max-num-seqs 64 -o json`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.Int64Var(&o.model.Layers, "layers", 0, "transformer layers (annotation platform.llm/model-layers)")
	f.Int64Var(&o.model.KVHeads, "kv-heads", 0, "key/value heads (platform.llm/model-kv-heads)")
	f.Int64Var(&o.model.HeadDim, "head-dim", 0, "head dimension (platform.llm/model-head-dim)")
	f.StringVar(&o.model.DType, "dtype", "fp16", "KV cache dtype: fp16, bf16, fp8, int8 or fp32")
	f.Int64Var(&o.context, "context", 0, "tokens per conversation (prompt + output); --max-model-len for the vLLM check")
	f.StringVar(&o.freeMemory, "free-memory", "", "GPU memory left for the KV cache, e.g. 10GiB")
	f.StringVar(&o.gpuMemory, "gpu-memory", "", "memory of one card, for the vLLM check (platform.llm/gpu-memory-bytes)")
	f.StringVar(&o.weights, "weights-size", "", "weights in GPU memory, for the vLLM check (platform.llm/weights-bytes)")
	f.Float64Var(&o.utilization, "gpu-memory-utilization", 0.9, "vLLM --gpu-memory-utilization, for the vLLM check")
	f.Int64Var(&o.maxNumSeqs, "max-num-seqs", 0, "vLLM --max-num-seqs, for the vLLM check")
	f.Int64Var(&o.batched, "max-num-batched-tokens", 0, "vLLM --max-num-batched-tokens, for the vLLM check's overhead (default: vLLM's for the card)")
	addReportOutput(cmd, &o.output)
	return cmd
}

// Complete notes whether the vLLM check was asked for.
func (o *kvOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.vllm = o.gpuMemory != "" || o.weights != "" || cmd.Flags().Changed("max-num-seqs")
	return nil
}

// Validate rejects missing model dimensions and a half-given vLLM check.
func (o *kvOptions) Validate() error {
	for _, req := range []struct {
		name string
		v    int64
	}{{"layers", o.model.Layers}, {"kv-heads", o.model.KVHeads}, {"head-dim", o.model.HeadDim}, {"context", o.context}} {
		if req.v <= 0 {
			return usageErr("--%s is required and must be positive", req.name)
		}
	}
	if o.vllm && o.freeMemory != "" {
		return usageErr("--free-memory and the vLLM check (--gpu-memory, --weights-size, --max-num-seqs) are mutually exclusive")
	}
	if o.vllm && (o.gpuMemory == "" || o.weights == "" || o.maxNumSeqs <= 0) {
		return usageErr("the vLLM check needs --gpu-memory, --weights-size and a positive --max-num-seqs")
	}
	return nil
}

// Run prints the KV cache arithmetic; exit code 1 when the vLLM configuration does not fit.
func (o *kvOptions) Run(_ context.Context, w io.Writer) error {
	res, err := o.compute()
	if err != nil {
		return err
	}
	err = writeReport(w, o.output, res, func() error {
		writeKV(w, res)
		return nil
	})
	if err != nil {
		return err
	}
	if res.VLLM != nil && !res.VLLM.Fits {
		return found("KV cache does not fit")
	}
	if res.ConversationsThatFit != nil && *res.ConversationsThatFit == 0 { // a finding, as a failed vLLM check
		return found("no conversation fits")
	}
	return nil
}

func (o *kvOptions) compute() (capacity.KVResult, error) {
	in := capacity.KVInput{Model: o.model, ContextTokens: o.context}
	switch {
	case o.vllm:
		gpu, err := capacity.ParseBytes(o.gpuMemory)
		if err != nil {
			return capacity.KVResult{}, usageErr("--gpu-memory: %w", err)
		}
		weights, err := capacity.ParseBytes(o.weights)
		if err != nil {
			return capacity.KVResult{}, usageErr("--weights-size: %w", err)
		}
		in.VLLM = &capacity.VLLMConfig{WeightsBytes: weights, GPUMemoryBytes: gpu,
			GPUMemoryUtilization: o.utilization, MaxNumSeqs: o.maxNumSeqs}
		in.MaxNumBatchedTokens = o.batched
	case o.freeMemory != "":
		free, err := capacity.ParseBytes(o.freeMemory)
		if err != nil {
			return capacity.KVResult{}, usageErr("--free-memory: %w", err)
		}
		in.FreeMemoryBytes = &free
	}
	res, err := capacity.KV(in)
	if err != nil {
		return res, inputErr(err)
	}
	return res, nil
}

func writeKV(w io.Writer, res capacity.KVResult) {
	m := res.Model
	bpv, _ := capacity.BytesPerValue(m.DType)
	fmt.Fprintf(w, "bytes per token:        %d B (%s) = 2 × %d layers × %d KV heads × %d head dim × %d B (%s)\n",
		res.BytesPerToken, capacity.HumanBytes(res.BytesPerToken), m.Layers, m.KVHeads, m.HeadDim, bpv, m.DType)
	fmt.Fprintf(w, "per conversation:       %d B (%s) for %d tokens\n",
		res.ConversationBytes, capacity.HumanBytes(res.ConversationBytes), res.ContextTokens)
	if res.FreeMemoryBytes != nil {
		fmt.Fprintf(w, "free memory:            %d B (%s)\n", *res.FreeMemoryBytes, capacity.HumanBytes(*res.FreeMemoryBytes))
		fmt.Fprintf(w, "conversations that fit: %d\n", *res.ConversationsThatFit)
	}
	if res.VLLM != nil {
		verdict := "fits"
		if !res.VLLM.Fits {
			verdict = "DOES NOT FIT"
		}
		fmt.Fprintf(w, "vllm worst case:        %s: %s\n", verdict, res.VLLM.Explanation)
	}
}
