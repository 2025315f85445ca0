package capacity

import (
	"errors"
	"strings"
	"testing"
)

// llama is the seed documents' example: Llama-3.1-8B (base/vllm/llama.yaml annotations).
var llama = Model{Layers: 32, KVHeads: 8, HeadDim: 128, DType: "fp16"}

func TestBytesPerValue(t *testing.T) {
	tests := []struct {
		dtype string
		want  int64
	}{
		{"fp16", 2}, {"FP16", 2}, {"bf16", 2}, {"bfloat16", 2}, {"float16", 2},
		{"fp8", 1}, {"int8", 1}, {"fp8_e4m3", 1},
		{"fp32", 4}, {"float32", 4},
	}
	for _, tt := range tests {
		got, err := BytesPerValue(tt.dtype)
		if err != nil || got != tt.want {
			t.Errorf("BytesPerValue(%q) = %d, %v; want %d", tt.dtype, got, err, tt.want)
		}
	}
	if _, err := BytesPerValue("int4"); !errors.Is(err, ErrInvalid) {
		t.Errorf("BytesPerValue(int4) error = %v, want ErrInvalid", err)
	}
}

func TestBytesPerToken(t *testing.T) {
	tests := []struct {
		name    string
		m       Model
		want    int64
		wantErr bool
	}{
		{name: "seed llama-3.1-8b fp16 = 128 KiB", m: llama, want: 131072},
		{name: "bf16 same as fp16", m: Model{32, 8, 128, "bf16"}, want: 131072},
		{name: "fp8 halves it", m: Model{32, 8, 128, "fp8"}, want: 65536},
		{name: "fp32 doubles it", m: Model{32, 8, 128, "fp32"}, want: 262144},
		{name: "qwen annotations 28x4x128", m: Model{28, 4, 128, "fp16"}, want: 57344},
		{name: "zero layers", m: Model{0, 8, 128, "fp16"}, wantErr: true},
		{name: "negative heads", m: Model{32, -8, 128, "fp16"}, wantErr: true},
		{name: "unknown dtype", m: Model{32, 8, 128, "q4"}, wantErr: true},
		{name: "overflow", m: Model{1 << 40, 1 << 20, 128, "fp32"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BytesPerToken(tt.m)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("BytesPerToken(%+v) = %d, %v; want ErrInvalid", tt.m, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("BytesPerToken(%+v) = %d, %v; want %d", tt.m, got, err, tt.want)
			}
		})
	}
}

func TestConversationBytes(t *testing.T) {
	tests := []struct {
		name    string
		tokens  int64
		want    int64
		wantErr bool
	}{
		{name: "seed 8000 tokens ≈ 1 GiB", tokens: 8000, want: 1_048_576_000},
		{name: "one token", tokens: 1, want: 131072},
		{name: "8192 tokens = exactly 1 GiB", tokens: 8192, want: 1 << 30},
		{name: "zero tokens", tokens: 0, wantErr: true},
		{name: "overflow", tokens: 1 << 50, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConversationBytes(llama, tt.tokens)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("ConversationBytes(%d) = %d, %v; want ErrInvalid", tt.tokens, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ConversationBytes(%d) = %d, %v; want %d", tt.tokens, got, err, tt.want)
			}
		})
	}
	if got := HumanBytes(1_048_576_000); got != "0.98 GiB" {
		t.Errorf("seed conversation reads %q, want 0.98 GiB", got)
	}
}

func TestConversationsThatFit(t *testing.T) {
	tests := []struct {
		name string
		free int64
		want int64
	}{
		{name: "seed: 80 GiB card, 70 GiB weights → 10", free: 80<<30 - 70<<30, want: 10},
		{name: "decimal: 80 GB − 70 GB → 9", free: 80e9 - 70e9, want: 9},
		{name: "exactly one", free: 1_048_576_000, want: 1},
		{name: "one byte short", free: 1_048_575_999, want: 0},
		{name: "nothing free", free: 0, want: 0},
		{name: "weights exceed card", free: -5 << 30, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConversationsThatFit(llama, 8000, tt.free)
			if err != nil || got != tt.want {
				t.Fatalf("ConversationsThatFit(8000, %d) = %d, %v; want %d", tt.free, got, err, tt.want)
			}
		})
	}
	if _, err := ConversationsThatFit(llama, -1, 1<<30); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative context: error %v, want ErrInvalid", err)
	}
}

func TestCheckVLLM(t *testing.T) {
	const l40s = 48305799168 // base/vllm: gpu-memory-bytes, L40S 46068 MiB
	tests := []struct {
		name         string
		c            VLLMConfig
		fits, seqOK  bool
		maxSeqs      int64
		explainHas   string
		wantErr      bool
		wantWorst    int64
		wantKVAvail  int64
		checkNumbers bool
	}{
		{
			name: "seed card: 80 GiB, 70 GiB weights, util 1, 8000 × 10 fits exactly",
			c: VLLMConfig{Model: llama, WeightsBytes: 70 << 30, GPUMemoryBytes: 80 << 30,
				GPUMemoryUtilization: 1, MaxModelLen: 8000, MaxNumSeqs: 10},
			fits: true, seqOK: true, maxSeqs: 10, explainHas: "fits",
			checkNumbers: true, wantWorst: 10_485_760_000, wantKVAvail: 10 << 30,
		},
		{
			name: "seed card: 11 conversations do not fit",
			c: VLLMConfig{Model: llama, WeightsBytes: 70 << 30, GPUMemoryBytes: 80 << 30,
				GPUMemoryUtilization: 1, MaxModelLen: 8000, MaxNumSeqs: 11},
			fits: false, seqOK: true, maxSeqs: 10, explainHas: "Lower --max-num-seqs to 10",
		},
		{
			name: "base/vllm/llama.yaml: 16384 × 64 on an L40S at 0.90 — worst case does not fit",
			c: VLLMConfig{Model: llama, WeightsBytes: 16060522496, GPUMemoryBytes: l40s,
				GPUMemoryUtilization: 0.90, MaxModelLen: 16384, MaxNumSeqs: 64},
			fits: false, seqOK: true, maxSeqs: 12, explainHas: "does NOT fit",
			checkNumbers: true, wantWorst: 16384 * 64 * 131072, wantKVAvail: 43475219251 - 16060522496,
		},
		{
			name: "base/vllm/qwen.yaml: 15 × 32768 fit before the overhead",
			c: VLLMConfig{Model: Model{Layers: 28, KVHeads: 4, HeadDim: 128, DType: "bf16"}, WeightsBytes: 15231233024, GPUMemoryBytes: l40s,
				GPUMemoryUtilization: 0.90, MaxModelLen: 32768, MaxNumSeqs: 15},
			fits: true, seqOK: true, maxSeqs: 15, explainHas: "fits",
		},
		{
			name: "base/vllm/qwen.yaml: after 3 GiB of overhead 13 × 32768 fit, not 15",
			c: VLLMConfig{Model: Model{Layers: 28, KVHeads: 4, HeadDim: 128, DType: "bf16"}, WeightsBytes: 15231233024, GPUMemoryBytes: l40s,
				GPUMemoryUtilization: 0.90, MaxModelLen: 32768, MaxNumSeqs: 15, OverheadBytes: 3 << 30},
			fits: false, seqOK: true, maxSeqs: 13, explainHas: "and 3 GiB of activation/graph overhead (estimate)",
		},
		{
			name: "weights larger than the budget",
			c: VLLMConfig{Model: llama, WeightsBytes: 45 << 30, GPUMemoryBytes: l40s,
				GPUMemoryUtilization: 0.90, MaxModelLen: 8192, MaxNumSeqs: 1},
			fits: false, seqOK: false, maxSeqs: 0, explainHas: "weights alone do not fit",
		},
		{
			name: "one sequence too long for the cache",
			c: VLLMConfig{Model: llama, WeightsBytes: 40 << 30, GPUMemoryBytes: l40s,
				GPUMemoryUtilization: 0.90, MaxModelLen: 131072, MaxNumSeqs: 1},
			fits: false, seqOK: false, maxSeqs: 0, explainHas: "vLLM refuses to start",
		},
		{name: "utilisation above 1", c: VLLMConfig{Model: llama, GPUMemoryBytes: l40s, GPUMemoryUtilization: 1.1, MaxModelLen: 1, MaxNumSeqs: 1}, wantErr: true},
		{name: "no GPU memory", c: VLLMConfig{Model: llama, GPUMemoryUtilization: 0.9, MaxModelLen: 1, MaxNumSeqs: 1}, wantErr: true},
		{name: "no max-num-seqs", c: VLLMConfig{Model: llama, GPUMemoryBytes: l40s, GPUMemoryUtilization: 0.9, MaxModelLen: 1}, wantErr: true},
		{name: "bad model", c: VLLMConfig{Model: Model{}, GPUMemoryBytes: l40s, GPUMemoryUtilization: 0.9, MaxModelLen: 1, MaxNumSeqs: 1}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckVLLM(tt.c)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("CheckVLLM error = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Fits != tt.fits || got.SequenceFits != tt.seqOK || got.MaxFullLengthSeqs != tt.maxSeqs {
				t.Errorf("CheckVLLM = fits %v, sequence fits %v, max seqs %d; want %v, %v, %d\n%s",
					got.Fits, got.SequenceFits, got.MaxFullLengthSeqs, tt.fits, tt.seqOK, tt.maxSeqs, got.Explanation)
			}
			if !strings.Contains(got.Explanation, tt.explainHas) {
				t.Errorf("explanation %q does not contain %q", got.Explanation, tt.explainHas)
			}
			if tt.checkNumbers && (got.WorstCaseBytes != tt.wantWorst || got.KVAvailableBytes != tt.wantKVAvail) {
				t.Errorf("worst case %d, KV available %d; want %d, %d", got.WorstCaseBytes, got.KVAvailableBytes, tt.wantWorst, tt.wantKVAvail)
			}
		})
	}
}
