package capacity

import (
	"fmt"
	"strconv"
)

// DefaultBlockSize is vLLM's --block-size on CUDA when the flag is not set: the KV cache is
// allocated in blocks of 16 tokens, as a sequence's tokens arrive.
const DefaultBlockSize = 16

// bigCardBytes is where vLLM's defaults change: from 70 GiB of card memory (H100, MI300X) the
// OpenAI server batches 8192 tokens per step, below it 2048 (vllm/engine/arg_utils.py,
// get_batch_defaults; an A100 80GB keeps 2048 there, which this estimate does not know).
const bigCardBytes = 70 << 30

// DefaultMaxNumBatchedTokens returns vLLM's default --max-num-batched-tokens for the OpenAI
// server on a card of gpuMemoryBytes: 8192 from 70 GiB, 2048 below (an L40S, a T4).
func DefaultMaxNumBatchedTokens(gpuMemoryBytes int64) int64 {
	if gpuMemoryBytes >= bigCardBytes {
		return 8192
	}
	return 2048
}

// Overhead estimates the GPU memory a vLLM replica keeps out of its KV cache besides the
// weights. vLLM measures it at start-up (v1 Worker.determine_available_memory): a profile run
// of one batch of --max-num-batched-tokens records the peak activation memory and the memory
// allocated outside torch (CUDA context, NCCL); the KV cache gets total × utilization minus
// weights, that peak and the non-torch memory. CUDA graphs are captured afterwards, from the
// same card. The platform cannot run that profile in review, so it uses a stated,
// conservative estimate: FixedBytes + PerBatchedTokenBytes × max-num-batched-tokens.
type Overhead struct {
	// FixedBytes covers what does not grow with the batch: non-torch memory (0.13-0.55 GiB
	// measured), CUDA graphs (up to ~1 GiB) and vLLM's 150 MiB redundancy buffer.
	FixedBytes int64 `json:"fixedBytes"`
	// PerBatchedTokenBytes is the peak activation memory per token of the profile batch.
	PerBatchedTokenBytes int64 `json:"perBatchedTokenBytes"`
}

// DefaultOverhead is the platform's estimate: 1 GiB fixed plus 1 MiB per batched token, 3 GiB
// at vLLM's 2048-token default. Published vLLM start-up logs (llm-d-benchmark,
// config_explorer/empirical-vllm-memory-results.md: Llama-3.1-8B, Qwen3-0.6B, gpt-oss-20b on an
// H100 at 8192 batched tokens) show 4.8-7.4 GiB of peak activation, i.e. 0.6-0.9 MiB per batched
// token, 0.13-0.55 GiB outside torch and -0.45 to 0.6 GiB of CUDA graphs: 1 MiB per token and
// 1 GiB fixed stay above all of them. An estimate, not a measurement: the
// replica's log line "Available KV cache memory" is the truth.
func DefaultOverhead() Overhead {
	return Overhead{FixedBytes: 1 << 30, PerBatchedTokenBytes: 1 << 20}
}

// Bytes returns the overhead at a batch of maxNumBatchedTokens.
func (o Overhead) Bytes(maxNumBatchedTokens int64) (int64, error) {
	if o.FixedBytes < 0 || o.PerBatchedTokenBytes < 0 || maxNumBatchedTokens <= 0 {
		return 0, fmt.Errorf("overhead %d B + %d B × %d batched tokens: the batch must be positive, the terms not negative: %w",
			o.FixedBytes, o.PerBatchedTokenBytes, maxNumBatchedTokens, ErrInvalid)
	}
	per, err := mul(o.PerBatchedTokenBytes, maxNumBatchedTokens)
	if err != nil {
		return 0, fmt.Errorf("overhead: %w", err)
	}
	return o.FixedBytes + per, nil
}

// Traffic is a model's stated traffic profile: how long its requests are. The platform states
// p95 lengths (annotations platform.llm/traffic-prompt-tokens, traffic-response-tokens).
type Traffic struct {
	// PromptTokens is the prompt length in tokens.
	PromptTokens int64 `json:"promptTokens"`
	// ResponseTokens is the generated length in tokens.
	ResponseTokens int64 `json:"responseTokens"`
}

// SeqsConfig is what sizes --max-num-seqs from a traffic profile.
type SeqsConfig struct {
	// VLLM is the replica: model, weights, card, --gpu-memory-utilization, --max-num-seqs.
	VLLM VLLMConfig `json:"vllm"`
	// MaxNumBatchedTokens is --max-num-batched-tokens; 0 takes DefaultMaxNumBatchedTokens.
	MaxNumBatchedTokens int64 `json:"maxNumBatchedTokens"`
	// BlockSize is --block-size; 0 takes DefaultBlockSize.
	BlockSize int64 `json:"blockSize"`
	// Traffic is the profile the setting is sized for.
	Traffic Traffic `json:"traffic"`
	// Overhead is the activation/CUDA graph estimate taken out of the KV cache.
	Overhead Overhead `json:"overhead"`
}

// SeqsFit is the verdict of SizeMaxNumSeqs with the numbers behind it.
type SeqsFit struct {
	// BudgetBytes is GPU memory × --gpu-memory-utilization.
	BudgetBytes int64 `json:"budgetBytes"`
	// OverheadBytes is the activation/CUDA graph estimate.
	OverheadBytes int64 `json:"overheadBytes"`
	// KVCacheBytes is BudgetBytes − weights − OverheadBytes; negative when nothing is left.
	KVCacheBytes int64 `json:"kvCacheBytes"`
	// KVBlocks is how many KV blocks KVCacheBytes holds.
	KVBlocks int64 `json:"kvBlocks"`
	// KVTokens is KVBlocks × block size.
	KVTokens int64 `json:"kvTokens"`
	// SeqTokens is the tokens one sequence of the profile holds at its end: prompt + response
	// rounded up to whole blocks.
	SeqTokens int64 `json:"seqTokens"`
	// ProfileSeqs is how many sequences of the profile the KV cache holds at once.
	ProfileSeqs int64 `json:"profileSeqs"`
	// UsedTokens is --max-num-seqs × SeqTokens: the KV cache a full batch of the profile holds.
	UsedTokens int64 `json:"usedTokens"`
	// UsedFraction is UsedTokens / KVTokens: how much of the KV cache the setting can use.
	UsedFraction float64 `json:"usedFraction"`
	// Fits is false when a full batch of the profile needs more KV cache than there is: vLLM
	// would preempt sequences whenever the batch is full.
	Fits bool `json:"fits"`
	// Explanation says the arithmetic in one line.
	Explanation string `json:"explanation"`
}

// SizeMaxNumSeqs works out how much of the KV cache --max-num-seqs can use at a traffic
// profile. vLLM's paged KV cache allocates blocks as tokens arrive, so a sequence of the
// profile holds ⌈(prompt + response) / block⌉ blocks at its end, not --max-model-len. The
// cache is GPU memory × utilization − weights − Overhead. Qwen2.5-7B on an L40S
// (48,305,799,168 B × 0.90 − 15,231,233,024 B of weights − 3 GiB) has 27,272 blocks of 16
// tokens; at 1,500 + 400 tokens (119 blocks) 229 sequences fit, and --max-num-seqs 15 uses
// 1,785 blocks: 6.5 %.
func SizeMaxNumSeqs(c SeqsConfig) (SeqsFit, error) {
	var f SeqsFit
	v := c.VLLM
	bpt, err := BytesPerToken(v.Model)
	if err != nil {
		return f, fmt.Errorf("max-num-seqs: %w", err)
	}
	batched, block := c.MaxNumBatchedTokens, c.BlockSize
	if batched == 0 {
		batched = DefaultMaxNumBatchedTokens(v.GPUMemoryBytes)
	}
	if block == 0 {
		block = DefaultBlockSize
	}
	switch {
	case v.GPUMemoryBytes <= 0 || v.WeightsBytes < 0:
		return f, fmt.Errorf("max-num-seqs: GPU memory %d B must be positive, weights %d B not negative: %w", v.GPUMemoryBytes, v.WeightsBytes, ErrInvalid)
	case !(v.GPUMemoryUtilization > 0 && v.GPUMemoryUtilization <= 1):
		return f, fmt.Errorf("max-num-seqs: --gpu-memory-utilization %g must be in (0, 1]: %w", v.GPUMemoryUtilization, ErrInvalid)
	case v.MaxNumSeqs <= 0 || block <= 0:
		return f, fmt.Errorf("max-num-seqs: --max-num-seqs %d and --block-size %d must be positive: %w", v.MaxNumSeqs, block, ErrInvalid)
	case c.Traffic.PromptTokens <= 0 || c.Traffic.ResponseTokens < 0:
		return f, fmt.Errorf("max-num-seqs: traffic profile of %d prompt + %d response tokens: the prompt must be positive: %w",
			c.Traffic.PromptTokens, c.Traffic.ResponseTokens, ErrInvalid)
	}
	if f.OverheadBytes, err = c.Overhead.Bytes(batched); err != nil {
		return f, fmt.Errorf("max-num-seqs: %w", err)
	}
	blockBytes, err := mul(bpt, block)
	if err != nil {
		return f, fmt.Errorf("max-num-seqs: block bytes: %w", err)
	}
	f.BudgetBytes = VLLMBudget(v.GPUMemoryBytes, v.GPUMemoryUtilization)
	f.KVCacheBytes = f.BudgetBytes - v.WeightsBytes - f.OverheadBytes
	if f.KVCacheBytes > 0 {
		f.KVBlocks = f.KVCacheBytes / blockBytes
	}
	f.KVTokens = f.KVBlocks * block
	seqBlocks := ceilDiv(c.Traffic.PromptTokens+c.Traffic.ResponseTokens, block)
	f.SeqTokens = seqBlocks * block
	f.ProfileSeqs = f.KVBlocks / seqBlocks
	if f.UsedTokens, err = mul(v.MaxNumSeqs, f.SeqTokens); err != nil {
		return f, fmt.Errorf("max-num-seqs: %w", err)
	}
	if f.KVTokens > 0 {
		f.UsedFraction = float64(f.UsedTokens) / float64(f.KVTokens)
	}
	f.Fits = f.KVTokens > 0 && f.UsedTokens <= f.KVTokens

	cache := fmt.Sprintf("KV cache %s × %.2f − %s weights − %s activation/graph overhead (estimate: %s + %s × %d batched tokens) = %s, %s tokens",
		HumanBytes(v.GPUMemoryBytes), v.GPUMemoryUtilization, HumanBytes(v.WeightsBytes), HumanBytes(f.OverheadBytes),
		HumanBytes(c.Overhead.FixedBytes), HumanBytes(c.Overhead.PerBatchedTokenBytes), batched,
		HumanBytes(f.KVCacheBytes), Thousands(f.KVTokens))
	use := fmt.Sprintf("--max-num-seqs %d × %s tokens (%s prompt + %s response in blocks of %d) = %s of %s KV tokens",
		v.MaxNumSeqs, Thousands(f.SeqTokens), Thousands(c.Traffic.PromptTokens), Thousands(c.Traffic.ResponseTokens), block,
		Thousands(f.UsedTokens), Thousands(f.KVTokens))
	switch {
	case f.KVTokens == 0:
		f.Explanation = cache + ": no room for a KV cache; vLLM will not start"
	case f.Fits:
		f.Explanation = fmt.Sprintf("%s: %.1f %%; the profile allows %d sequences (%s)", use, 100*f.UsedFraction, f.ProfileSeqs, cache)
	default:
		f.Explanation = fmt.Sprintf("%s: %.0f %%, more than the cache holds: a full batch of the profile is preempted; "+
			"the profile allows %d sequences (%s)", use, 100*f.UsedFraction, f.ProfileSeqs, cache)
	}
	return f, nil
}

// WithOverhead is c's replica with the overhead estimate at its batch (--max-num-batched-tokens,
// or vLLM's default for the card) set: what CheckVLLM counts as vLLM does.
func (c SeqsConfig) WithOverhead() (VLLMConfig, error) {
	batched := c.MaxNumBatchedTokens
	if batched == 0 {
		batched = DefaultMaxNumBatchedTokens(c.VLLM.GPUMemoryBytes)
	}
	v := c.VLLM
	var err error
	if v.OverheadBytes, err = c.Overhead.Bytes(batched); err != nil {
		return v, fmt.Errorf("vllm check: %w", err)
	}
	return v, nil
}

// FullLengthSeqs returns how many sequences at --max-model-len the KV cache holds after the
// weights and c's overhead estimate: CheckVLLM's count on c.WithOverhead(). Qwen2.5-7B on an
// L40S at 32768 tokens holds 13. auditor check (rule capacity-kv-cache and the report) and
// auditor capacity kv all use this count.
func FullLengthSeqs(c SeqsConfig) (int64, error) {
	v, err := c.WithOverhead()
	if err != nil {
		return 0, err
	}
	f, err := CheckVLLM(v)
	if err != nil {
		return 0, err
	}
	return f.MaxFullLengthSeqs, nil
}

// VLLMBudget returns what vLLM may use of a card: ⌊gpuMemoryBytes × utilization⌋.
func VLLMBudget(gpuMemoryBytes int64, utilization float64) int64 {
	return int64(float64(gpuMemoryBytes) * utilization)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Thousands formats n with commas between groups of three digits: 436352 reads "436,352".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i, d := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, d)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
