package capacity

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The platform's cards and models (base/vllm, overlays/dev annotations).
const (
	l40s = 48305799168 // 46068 MiB
	t4   = 16106127360 // 15360 MiB = 15 GiB
)

var (
	qwen7B   = Model{Layers: 28, KVHeads: 4, HeadDim: 128, DType: "bf16"} // 57,344 B/token
	llama8B  = Model{Layers: 32, KVHeads: 8, HeadDim: 128, DType: "bf16"} // 131,072 B/token
	qwen15B  = Model{Layers: 28, KVHeads: 2, HeadDim: 128, DType: "fp16"} // 28,672 B/token
	llama1B  = Model{Layers: 16, KVHeads: 8, HeadDim: 64, DType: "fp16"}  // 32,768 B/token
	overhead = DefaultOverhead()
)

func TestDefaultMaxNumBatchedTokens(t *testing.T) {
	assert.Equal(t, int64(2048), DefaultMaxNumBatchedTokens(l40s))
	assert.Equal(t, int64(2048), DefaultMaxNumBatchedTokens(t4))
	assert.Equal(t, int64(8192), DefaultMaxNumBatchedTokens(80<<30)) // H100
	assert.Equal(t, int64(8192), DefaultMaxNumBatchedTokens(70<<30)) // the threshold itself
}

func TestOverheadBytes(t *testing.T) {
	cases := []struct {
		name    string
		o       Overhead
		batched int64
		want    int64
		wantErr bool
	}{
		// 1 GiB + 2048 × 1 MiB = 1 + 2 = 3 GiB = 3,221,225,472 B
		{"default at 2048 batched tokens", overhead, 2048, 3 << 30, false},
		// 1 GiB + 8192 MiB = 9 GiB
		{"default at 8192 batched tokens", overhead, 8192, 9 << 30, false},
		{"fixed only", Overhead{FixedBytes: 512 << 20}, 4096, 512 << 20, false},
		{"no batch", overhead, 0, 0, true},
		{"negative term", Overhead{FixedBytes: -1}, 2048, 0, true},
		{"overflow", Overhead{PerBatchedTokenBytes: 1 << 62}, 4, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.o.Bytes(tc.batched)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSizeMaxNumSeqs(t *testing.T) {
	vllm := func(m Model, weights, card, seqs int64) VLLMConfig {
		return VLLMConfig{Model: m, WeightsBytes: weights, GPUMemoryBytes: card, GPUMemoryUtilization: 0.90, MaxModelLen: 8192, MaxNumSeqs: seqs}
	}
	cases := []struct {
		name string
		cfg  SeqsConfig
		want SeqsFit // the numbers; Explanation checked apart
	}{
		{
			// budget ⌊48,305,799,168 × 0.9⌋ = 43,475,219,251; − 15,231,233,024 weights − 3,221,225,472 overhead
			// = 25,022,760,755 B; a block is 16 × 57,344 = 917,504 B: 27,272 blocks = 436,352 tokens.
			// 1,500 + 400 = 1,900 → ⌈1,900/16⌉ = 119 blocks = 1,904 tokens; 27,272 / 119 = 229 sequences.
			// 15 × 1,904 = 28,560 tokens = 28,560 / 436,352 = 6.5 %.
			name: "prod qwen 7B on an L40S, 15 sequences of 1,500 + 400",
			cfg:  SeqsConfig{VLLM: vllm(qwen7B, 15231233024, l40s, 15), Traffic: Traffic{1500, 400}, Overhead: overhead},
			want: SeqsFit{BudgetBytes: 43475219251, OverheadBytes: 3 << 30, KVCacheBytes: 25022760755, KVBlocks: 27272, KVTokens: 436352,
				SeqTokens: 1904, ProfileSeqs: 229, UsedTokens: 28560, UsedFraction: 28560.0 / 436352, Fits: true},
		},
		{
			// 43,475,219,251 − 16,060,522,496 − 3,221,225,472 = 24,193,471,283 B; a block is 16 × 131,072 =
			// 2,097,152 B: 11,536 blocks = 184,576 tokens. 1,000 + 600 = 1,600 = 100 blocks: 115 sequences.
			// 12 × 1,600 = 19,200 tokens.
			name: "prod llama 8B on an L40S, 12 sequences of 1,000 + 600",
			cfg:  SeqsConfig{VLLM: vllm(llama8B, 16060522496, l40s, 12), Traffic: Traffic{1000, 600}, Overhead: overhead},
			want: SeqsFit{BudgetBytes: 43475219251, OverheadBytes: 3 << 30, KVCacheBytes: 24193471283, KVBlocks: 11536, KVTokens: 184576,
				SeqTokens: 1600, ProfileSeqs: 115, UsedTokens: 19200, UsedFraction: 19200.0 / 184576, Fits: true},
		},
		{
			// ⌊16,106,127,360 × 0.9⌋ = 14,495,514,624 − 3,087,467,520 − 3,221,225,472 = 8,186,821,632 B; a block
			// is 16 × 28,672 = 458,752 B: 17,845 blocks = 285,520 tokens; 17,845 / 119 = 149 sequences;
			// 34 × 1,904 = 64,736 tokens.
			name: "dev qwen 1.5B on a T4, 34 sequences",
			cfg:  SeqsConfig{VLLM: vllm(qwen15B, 3087467520, t4, 34), Traffic: Traffic{1500, 400}, Overhead: overhead},
			want: SeqsFit{BudgetBytes: 14495514624, OverheadBytes: 3 << 30, KVCacheBytes: 8186821632, KVBlocks: 17845, KVTokens: 285520,
				SeqTokens: 1904, ProfileSeqs: 149, UsedTokens: 64736, UsedFraction: 64736.0 / 285520, Fits: true},
		},
		{
			// 14,495,514,624 − 2,471,645,608 − 3,221,225,472 = 8,802,643,544 B; a block is 16 × 32,768 =
			// 524,288 B: 16,789 blocks = 268,624 tokens; 16,789 / 100 = 167 sequences. 200 × 1,600 = 320,000
			// tokens > 268,624: does not fit (119 %).
			name: "dev llama 1B on a T4, 200 sequences: more than the cache holds",
			cfg:  SeqsConfig{VLLM: vllm(llama1B, 2471645608, t4, 200), Traffic: Traffic{1000, 600}, Overhead: overhead},
			want: SeqsFit{BudgetBytes: 14495514624, OverheadBytes: 3 << 30, KVCacheBytes: 8802643544, KVBlocks: 16789, KVTokens: 268624,
				SeqTokens: 1600, ProfileSeqs: 167, UsedTokens: 320000, UsedFraction: 320000.0 / 268624, Fits: false},
		},
		{
			// a profile of 1 token still takes a whole block: 16 tokens; block size 32 makes it 32.
			// The 8 GiB batch (8192 tokens at 1 MiB) + 1 GiB = 9 GiB overhead: 43,475,219,251 − 15,231,233,024
			// − 9,663,676,416 = 18,580,309,811 B / (32 × 57,344 = 1,835,008 B) = 10,125 blocks = 324,000 tokens.
			name: "--block-size 32, --max-num-batched-tokens 8192",
			cfg: SeqsConfig{VLLM: vllm(qwen7B, 15231233024, l40s, 10), MaxNumBatchedTokens: 8192, BlockSize: 32,
				Traffic: Traffic{1, 0}, Overhead: overhead},
			want: SeqsFit{BudgetBytes: 43475219251, OverheadBytes: 9 << 30, KVCacheBytes: 18580309811, KVBlocks: 10125, KVTokens: 324000,
				SeqTokens: 32, ProfileSeqs: 10125, UsedTokens: 320, UsedFraction: 320.0 / 324000, Fits: true},
		},
		{
			// 14 GiB of weights on a T4: 14,495,514,624 − 15,032,385,536 − 3 GiB < 0: no KV cache at all.
			name: "weights and overhead leave nothing",
			cfg:  SeqsConfig{VLLM: vllm(llama1B, 14<<30, t4, 1), Traffic: Traffic{100, 100}, Overhead: overhead},
			want: SeqsFit{BudgetBytes: 14495514624, OverheadBytes: 3 << 30, KVCacheBytes: 14495514624 - 14<<30 - 3<<30,
				SeqTokens: 208, UsedTokens: 208},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SizeMaxNumSeqs(tc.cfg)
			require.NoError(t, err)
			assert.NotEmpty(t, got.Explanation)
			got.Explanation = ""
			assert.InDelta(t, tc.want.UsedFraction, got.UsedFraction, 1e-9)
			got.UsedFraction = tc.want.UsedFraction
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestSizeMaxNumSeqsExplains: the explanation carries the numbers a reviewer checks.
func TestSizeMaxNumSeqsExplains(t *testing.T) {
	cfg := SeqsConfig{VLLM: VLLMConfig{Model: qwen7B, WeightsBytes: 15231233024, GPUMemoryBytes: l40s, GPUMemoryUtilization: 0.9,
		MaxModelLen: 32768, MaxNumSeqs: 15}, Traffic: Traffic{1500, 400}, Overhead: overhead}
	got, err := SizeMaxNumSeqs(cfg)
	require.NoError(t, err)
	for _, want := range []string{"--max-num-seqs 15 × 1,904 tokens", "= 28,560 of 436,352 KV tokens: 6.5 %", "the profile allows 229 sequences",
		"3 GiB activation/graph overhead (estimate: 1 GiB + 1 MiB × 2048 batched tokens)"} {
		assert.Contains(t, got.Explanation, want)
	}
	cfg.VLLM.MaxNumSeqs = 300 // 300 × 1,904 = 571,200 > 436,352
	got, err = SizeMaxNumSeqs(cfg)
	require.NoError(t, err)
	assert.False(t, got.Fits)
	assert.Contains(t, got.Explanation, "571,200 of 436,352 KV tokens: 131 %, more than the cache holds")
}

func TestSizeMaxNumSeqsRejects(t *testing.T) {
	good := SeqsConfig{VLLM: VLLMConfig{Model: qwen7B, WeightsBytes: 1, GPUMemoryBytes: l40s, GPUMemoryUtilization: 0.9, MaxNumSeqs: 1},
		Traffic: Traffic{100, 100}, Overhead: overhead}
	cases := map[string]func(c *SeqsConfig){
		"no prompt":         func(c *SeqsConfig) { c.Traffic.PromptTokens = 0 },
		"negative response": func(c *SeqsConfig) { c.Traffic.ResponseTokens = -1 },
		"no max-num-seqs":   func(c *SeqsConfig) { c.VLLM.MaxNumSeqs = 0 },
		"utilization 1.2":   func(c *SeqsConfig) { c.VLLM.GPUMemoryUtilization = 1.2 },
		"no card":           func(c *SeqsConfig) { c.VLLM.GPUMemoryBytes = 0 },
		"unknown dtype":     func(c *SeqsConfig) { c.VLLM.Model.DType = "q4" },
		"negative block":    func(c *SeqsConfig) { c.BlockSize = -16 },
		"negative overhead": func(c *SeqsConfig) { c.Overhead.FixedBytes = -1 },
		"negative batch":    func(c *SeqsConfig) { c.MaxNumBatchedTokens = -1 },
		"negative weights":  func(c *SeqsConfig) { c.VLLM.WeightsBytes = -1 },
		"zero layers, too ": func(c *SeqsConfig) { c.VLLM.Model.Layers = 0 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := good
			mutate(&c)
			_, err := SizeMaxNumSeqs(c)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 436352: "436,352", 1234567: "1,234,567", -28560: "-28,560"} {
		assert.Equal(t, want, Thousands(n))
	}
}

// TestFullLengthSeqsIsCheckVLLMsCount: the sequences at --max-model-len after the overhead are
// CheckVLLM's count on the replica with its overhead, at vLLM's default batch for the card or
// at --max-num-batched-tokens.
func TestFullLengthSeqsIsCheckVLLMsCount(t *testing.T) {
	qwen := VLLMConfig{Model: Model{Layers: 28, KVHeads: 4, HeadDim: 128, DType: "bf16"}, WeightsBytes: 15231233024,
		GPUMemoryBytes: 48305799168, GPUMemoryUtilization: 0.90, MaxModelLen: 32768, MaxNumSeqs: 13}
	for _, tc := range []struct {
		batched, want int64
	}{{0, 13}, {2048, 13}, {8192, 9}} {
		c := SeqsConfig{VLLM: qwen, MaxNumBatchedTokens: tc.batched, Overhead: DefaultOverhead()}
		n, err := FullLengthSeqs(c)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.WithOverhead()
		if err != nil {
			t.Fatal(err)
		}
		fit, err := CheckVLLM(v)
		if err != nil {
			t.Fatal(err)
		}
		if n != tc.want || fit.MaxFullLengthSeqs != n || fit.Fits != (tc.want >= 13) {
			t.Errorf("batched %d: FullLengthSeqs %d, CheckVLLM %d (fits %v); want %d", tc.batched, n, fit.MaxFullLengthSeqs, fit.Fits, tc.want)
		}
	}
}
