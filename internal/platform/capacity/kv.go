package capacity

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// BytesPerValue returns the size of one stored KV cache element for a dtype: fp16, bf16 (and
// float16, bfloat16, half) = 2; fp8, int8 (and the fp8_e4m3/fp8_e5m2 variants) = 1;
// fp32 (float32, float) = 4. Matching is case-insensitive.
func BytesPerValue(dtype string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(dtype)) {
	case "fp16", "float16", "half", "bf16", "bfloat16":
		return 2, nil
	case "fp8", "fp8_e4m3", "fp8_e5m2", "int8":
		return 1, nil
	case "fp32", "float32", "float":
		return 4, nil
	default:
		return 0, fmt.Errorf("dtype %q: want fp16, bf16, fp8, int8 or fp32: %w", dtype, ErrInvalid)
	}
}

// Model holds the architecture facts that size a transformer's KV cache — the values of the
// platform.llm/model-layers, model-kv-heads, model-head-dim and model-dtype annotations.
type Model struct {
	// Layers is the number of transformer layers (32 for Llama-3.1-8B).
	Layers int64 `json:"layers"`
	// KVHeads is the number of key/value heads, smaller than the attention heads under
	// grouped-query attention (8 for Llama-3.1-8B).
	KVHeads int64 `json:"kvHeads"`
	// HeadDim is the dimension of one head (128 for Llama-3.1-8B).
	HeadDim int64 `json:"headDim"`
	// DType is the KV cache element type: fp16, bf16, fp8, int8 or fp32.
	DType string `json:"dtype"`
}

// BytesPerToken returns the KV cache one token occupies:
// 2 (a key and a value) × layers × KV heads × head dim × bytes per value.
// Llama-3.1-8B (32 layers, 8 KV heads, head dim 128, fp16) needs 131,072 B = 128 KiB.
func BytesPerToken(m Model) (int64, error) {
	bpv, err := BytesPerValue(m.DType)
	if err != nil {
		return 0, err
	}
	if m.Layers <= 0 || m.KVHeads <= 0 || m.HeadDim <= 0 {
		return 0, fmt.Errorf("model layers %d, KV heads %d, head dim %d: all must be positive: %w",
			m.Layers, m.KVHeads, m.HeadDim, ErrInvalid)
	}
	v := int64(2)
	for _, f := range []int64{m.Layers, m.KVHeads, m.HeadDim, bpv} {
		if v, err = mul(v, f); err != nil {
			return 0, fmt.Errorf("bytes per token: %w", err)
		}
	}
	return v, nil
}

// ConversationBytes returns the KV cache one conversation (sequence) of the given number of
// tokens — prompt plus generated — occupies: tokens × BytesPerToken. For Llama-3.1-8B, 8,000
// tokens take 1,048,576,000 B ≈ 0.98 GiB, "about 1 GiB per conversation".
func ConversationBytes(m Model, tokens int64) (int64, error) {
	bpt, err := BytesPerToken(m)
	if err != nil {
		return 0, err
	}
	if tokens <= 0 {
		return 0, fmt.Errorf("context of %d tokens: must be positive: %w", tokens, ErrInvalid)
	}
	v, err := mul(bpt, tokens)
	if err != nil {
		return 0, fmt.Errorf("conversation bytes: %w", err)
	}
	return v, nil
}

// ConversationsThatFit returns how many conversations of the given length fit, whole, in
// freeBytes of GPU memory: floor(freeBytes / ConversationBytes). An 80 GiB card holding
// 70 GiB of weights leaves 10 GiB, room for 10 Llama-3.1-8B conversations of 8,000 tokens
// (with decimal GB, 80 GB − 70 GB leaves 10 GB and only 9 fit). Zero or negative free memory
// fits none.
func ConversationsThatFit(m Model, tokens, freeBytes int64) (int64, error) {
	per, err := ConversationBytes(m, tokens)
	if err != nil {
		return 0, err
	}
	if freeBytes <= 0 {
		return 0, nil
	}
	return freeBytes / per, nil
}

// mul multiplies two non-negative int64s, failing instead of overflowing.
func mul(a, b int64) (int64, error) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("%d × %d overflows int64: %w", a, b, ErrInvalid)
	}
	return int64(lo), nil
}

// VLLMConfig is what decides whether a vLLM replica's KV cache fits on its GPU: the model,
// its weights, the card, and the engine flags --gpu-memory-utilization, --max-model-len and
// --max-num-seqs. One card per replica (no tensor parallelism) is assumed.
type VLLMConfig struct {
	// Model sizes the KV cache per token.
	Model Model `json:"model"`
	// WeightsBytes is the size of the weights in GPU memory (annotation platform.llm/weights-bytes).
	WeightsBytes int64 `json:"weightsBytes"`
	// GPUMemoryBytes is the memory of one card (annotation platform.llm/gpu-memory-bytes).
	GPUMemoryBytes int64 `json:"gpuMemoryBytes"`
	// GPUMemoryUtilization is --gpu-memory-utilization, the fraction of the card vLLM may use
	// (vLLM's default is 0.9).
	GPUMemoryUtilization float64 `json:"gpuMemoryUtilization"`
	// MaxModelLen is --max-model-len, the longest sequence (prompt + output) in tokens.
	MaxModelLen int64 `json:"maxModelLen"`
	// MaxNumSeqs is --max-num-seqs, the most sequences batched at once (vLLM's default is 256
	// on most GPUs; the platform sets it explicitly).
	MaxNumSeqs int64 `json:"maxNumSeqs"`
	// OverheadBytes is the memory vLLM keeps out of the KV cache besides the weights:
	// activations, CUDA graphs, the CUDA context (Overhead; SeqsConfig.WithOverhead sets it).
	OverheadBytes int64 `json:"overheadBytes,omitempty"`
}

// VLLMFit is the verdict of CheckVLLM with the numbers behind it.
type VLLMFit struct {
	// BytesPerToken is the model's KV cache per token.
	BytesPerToken int64 `json:"bytesPerToken"`
	// BudgetBytes is GPUMemoryBytes × GPUMemoryUtilization, what vLLM may use.
	BudgetBytes int64 `json:"budgetBytes"`
	// KVAvailableBytes is BudgetBytes − WeightsBytes − OverheadBytes, what is left for the KV
	// cache; negative when the weights and the overhead do not fit.
	KVAvailableBytes int64 `json:"kvAvailableBytes"`
	// SequenceBytes is the KV cache of one sequence at MaxModelLen.
	SequenceBytes int64 `json:"sequenceBytes"`
	// WorstCaseBytes is the KV cache of MaxNumSeqs sequences all at MaxModelLen.
	WorstCaseBytes int64 `json:"worstCaseBytes"`
	// MaxFullLengthSeqs is how many sequences at MaxModelLen fit at once.
	MaxFullLengthSeqs int64 `json:"maxFullLengthSeqs"`
	// MaxTokens is how many tokens of KV cache fit in KVAvailableBytes.
	MaxTokens int64 `json:"maxTokens"`
	// SequenceFits is true when one sequence at MaxModelLen fits. vLLM refuses to start
	// otherwise ("max seq len is larger than the maximum number of tokens that can be stored
	// in KV cache").
	SequenceFits bool `json:"sequenceFits"`
	// Fits is the platform invariant: the worst case, MaxNumSeqs sequences at MaxModelLen,
	// fits, so no request is ever preempted for lack of KV cache.
	Fits bool `json:"fits"`
	// Explanation says, in one paragraph, why.
	Explanation string `json:"explanation"`
}

// CheckVLLM checks the platform invariant on a vLLM configuration: the KV cache needed when
// --max-num-seqs sequences are all --max-model-len long must fit in
// GPUMemoryBytes × GPUMemoryUtilization − WeightsBytes. It also reports the weaker condition
// vLLM itself enforces at start-up (one full-length sequence fits) and how many full-length
// sequences do fit. Activations, CUDA graphs and the CUDA context, which vLLM also takes out
// of the budget, are c.OverheadBytes: the platform's estimate (SeqsConfig.WithOverhead) is
// what auditor check and auditor capacity kv count.
func CheckVLLM(c VLLMConfig) (VLLMFit, error) {
	var f VLLMFit
	bpt, err := BytesPerToken(c.Model)
	if err != nil {
		return f, fmt.Errorf("vllm check: %w", err)
	}
	switch {
	case c.GPUMemoryBytes <= 0:
		return f, fmt.Errorf("vllm check: GPU memory %d B must be positive: %w", c.GPUMemoryBytes, ErrInvalid)
	case c.WeightsBytes < 0 || c.OverheadBytes < 0:
		return f, fmt.Errorf("vllm check: weights %d B and overhead %d B must not be negative: %w", c.WeightsBytes, c.OverheadBytes, ErrInvalid)
	case !(c.GPUMemoryUtilization > 0 && c.GPUMemoryUtilization <= 1):
		return f, fmt.Errorf("vllm check: --gpu-memory-utilization %g must be in (0, 1]: %w", c.GPUMemoryUtilization, ErrInvalid)
	case c.MaxModelLen <= 0:
		return f, fmt.Errorf("vllm check: --max-model-len %d must be positive: %w", c.MaxModelLen, ErrInvalid)
	case c.MaxNumSeqs <= 0:
		return f, fmt.Errorf("vllm check: --max-num-seqs %d must be positive: %w", c.MaxNumSeqs, ErrInvalid)
	}
	f.BytesPerToken = bpt
	f.BudgetBytes = int64(math.Floor(float64(c.GPUMemoryBytes) * c.GPUMemoryUtilization))
	f.KVAvailableBytes = f.BudgetBytes - c.WeightsBytes - c.OverheadBytes
	if f.SequenceBytes, err = mul(bpt, c.MaxModelLen); err != nil {
		return f, fmt.Errorf("vllm check: sequence bytes: %w", err)
	}
	if f.WorstCaseBytes, err = mul(f.SequenceBytes, c.MaxNumSeqs); err != nil {
		return f, fmt.Errorf("vllm check: worst-case bytes: %w", err)
	}
	if f.KVAvailableBytes > 0 {
		f.MaxFullLengthSeqs = f.KVAvailableBytes / f.SequenceBytes
		f.MaxTokens = f.KVAvailableBytes / bpt
	}
	f.SequenceFits = f.MaxFullLengthSeqs >= 1
	f.Fits = f.KVAvailableBytes >= f.WorstCaseBytes

	overhead := ""
	if c.OverheadBytes > 0 {
		overhead = fmt.Sprintf(" and %s of activation/graph overhead (estimate)", HumanBytes(c.OverheadBytes))
	}
	head := fmt.Sprintf("%s × %.2f = %s usable, minus %s of weights%s, leaves %s for the KV cache; "+
		"%d seqs × %d tokens × %d B/token needs %s",
		HumanBytes(c.GPUMemoryBytes), c.GPUMemoryUtilization, HumanBytes(f.BudgetBytes),
		HumanBytes(c.WeightsBytes), overhead, HumanBytes(f.KVAvailableBytes),
		c.MaxNumSeqs, c.MaxModelLen, bpt, HumanBytes(f.WorstCaseBytes))
	switch {
	case f.KVAvailableBytes <= 0:
		what := "the weights alone do"
		if c.OverheadBytes > 0 {
			what = "the weights and the overhead do"
		}
		f.Explanation = head + ": " + what + " not fit in the usable memory; vLLM will not start."
	case f.Fits:
		f.Explanation = head + fmt.Sprintf(": fits (%s to spare); every sequence can reach --max-model-len at full batch.",
			HumanBytes(f.KVAvailableBytes-f.WorstCaseBytes))
	case f.SequenceFits:
		f.Explanation = head + fmt.Sprintf(": does NOT fit; only %d sequences at --max-model-len fit at once "+
			"(%d tokens in all), so at full batch with long sequences vLLM preempts requests. "+
			"Lower --max-num-seqs to %d or --max-model-len to %d, or use a larger card.",
			f.MaxFullLengthSeqs, f.MaxTokens, f.MaxFullLengthSeqs, f.MaxTokens/c.MaxNumSeqs)
	default:
		f.Explanation = head + fmt.Sprintf(": does NOT fit, not even one sequence at --max-model-len "+
			"(%d tokens fit); vLLM refuses to start. Lower --max-model-len to at most %d.",
			f.MaxTokens, f.MaxTokens)
	}
	return f, nil
}
