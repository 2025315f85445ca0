package check

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// qwenOnL40S is base/vllm/qwen.yaml's Deployment cut to what rule vllm-max-num-seqs reads:
// Qwen2.5-7B (57,344 B/token) on an L40S at 0.90 with 15,231,233,024 B of weights, which leaves
// 436,352 KV tokens after the 3 GiB overhead estimate (internal/platform/capacity's test works it out).
func qwenOnL40S(seqs, maxModelLen, profile string) string {
	return `{apiVersion: apps/v1, kind: Deployment, metadata: {name: vllm-qwen, namespace: llm-inference, annotations: {
  platform.llm/model: qwen, platform.llm/model-layers: "28", platform.llm/model-kv-heads: "4", platform.llm/model-head-dim: "128",
  platform.llm/model-dtype: bf16, platform.llm/weights-bytes: "15231233024", platform.llm/gpu-memory-bytes: "48305799168"` + profile + `}},
  spec: {template: {spec: {containers: [{name: vllm, image: "vllm/vllm-openai:v0.30.0",
    args: [--max-model-len=` + maxModelLen + `, --gpu-memory-utilization=0.90, --max-num-seqs=` + seqs + `]}]}}}}`
}

const p95 = `, platform.llm/traffic-prompt-tokens: "1500", platform.llm/traffic-response-tokens: "400"`

func TestVLLMMaxNumSeqs(t *testing.T) {
	cases := []struct {
		name       string
		obj        string
		violation  []string // substrings of the one violation, if any
		warning    []string // substrings of the one warning, if any
		wantUse    bool
		usedTokens int64
	}{
		// 150 × 1,904 = 285,600 of 436,352: 65.5 %, more than half of the 229 the profile allows.
		{name: "well sized", obj: qwenOnL40S("150", "2048", p95), wantUse: true, usedTokens: 285600},
		// 13 × 1,904 = 24,752: 5.7 %; 436,352 / 32,768 = 13 full-length sequences fit, 13 >= 13.
		{name: "held down by --max-model-len (the repository's qwen)", obj: qwenOnL40S("13", "32768", p95),
			warning: []string{"Deployment llm-inference/vllm-qwen", "under-sized", "--max-num-seqs 13 × 1,904 tokens", "24,752 of 436,352 KV tokens: 5.7 %",
				"the profile allows 229 sequences", "--max-model-len 32768 holds it down: 13 sequences at that length fill the cache"},
			wantUse: true, usedTokens: 24752},
		// 436,352 / 4,096 = 106 full-length sequences: nothing but the setting holds it at 40.
		{name: "under-sized for no reason", obj: qwenOnL40S("40", "4096", p95),
			warning: []string{"under-sized", "the profile allows 229", "Up to 106, even a batch of requests at --max-model-len 4096 fits"},
			wantUse: true, usedTokens: 76160},
		// 300 × 1,904 = 571,200 > 436,352.
		{name: "more than the cache holds", obj: qwenOnL40S("300", "1024", p95),
			violation: []string{"Deployment llm-inference/vllm-qwen", "--max-num-seqs 300 × 1,904 tokens", "571,200 of 436,352 KV tokens: 131 %",
				"more than the cache holds", "lower --max-num-seqs to 229"},
			wantUse: true, usedTokens: 571200},
		{name: "no profile", obj: qwenOnL40S("15", "32768", ""),
			violation: []string{"Deployment llm-inference/vllm-qwen", "no traffic profile", "platform.llm/traffic-prompt-tokens"}},
		{name: "not a vLLM Deployment", obj: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: rag-api, namespace: llm-api},
  spec: {template: {spec: {containers: [{name: api, image: "x:1"}]}}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uses, violations, warnings := vllmMaxNumSeqs(parseObjects(t, tc.obj), nil)
			check := func(kind string, got []Violation, want []string) {
				if want == nil {
					assert.Empty(t, got, kind)
					return
				}
				require.Len(t, got, 1, kind)
				assert.Equal(t, "vllm-max-num-seqs", got[0].Rule)
				assert.Equal(t, "Deployment llm-inference/vllm-qwen", got[0].Object)
				for _, w := range want {
					assert.Contains(t, got[0].Object+": "+got[0].Message, w, kind)
				}
			}
			check("violation", violations, tc.violation)
			check("warning", warnings, tc.warning)
			if !tc.wantUse {
				assert.Empty(t, uses)
				return
			}
			require.Len(t, uses, 1)
			assert.Equal(t, tc.usedTokens, uses[0].UsedTokens)
			assert.Equal(t, int64(436352), uses[0].KVTokens)
			assert.Equal(t, int64(229), uses[0].ProfileSeqs)
		})
	}
}

func TestWriteKVCache(t *testing.T) {
	uses := []KVCacheUse{{Object: "Deployment llm-inference/vllm-qwen", MaxNumSeqs: 15, SeqTokens: 1904, UsedTokens: 28560,
		KVTokens: 436352, Percent: 6.545, ProfileSeqs: 229, FullLengthSeqs: 13}}
	for md, want := range map[bool][]string{
		true: {"| vLLM Deployment | --max-num-seqs | × tokens per sequence | = of KV tokens | KV cache used | the profile allows | at --max-model-len |",
			"| `Deployment llm-inference/vllm-qwen` | 15 | 1,904 | 28,560 of 436,352 | 6.5 % | 229 | 13 |"},
		false: {"  KV-CACHE Deployment llm-inference/vllm-qwen max-num-seqs=15 × 1,904 tokens = 28,560 of 436,352 KV tokens (6.5 %); profile allows 229, 13 at max-model-len"},
	} {
		var b bytes.Buffer
		WriteKVCache(&b, uses, md)
		for _, w := range want {
			assert.Contains(t, b.String(), w, "markdown %v", md)
		}
	}
	var b bytes.Buffer
	WriteKVCache(&b, nil, true)
	assert.Empty(t, b.String())
}

// TestCheckMaxNumSeqsNegative: a copy of the repository whose qwen states prompts of 30,000
// tokens: 15 × 30,400 = 456,000 tokens, more than the 436,352 an L40S keeps for qwen's KV cache
// (and dev's 34 × 30,400 more than a T4's 285,520), while every sequence at --max-model-len
// still fits without the overhead (rule capacity-kv-cache passes). auditor check fails, naming
// the Deployment in each env; the canary states its own profile and passes.
func TestCheckMaxNumSeqsNegative(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("base/vllm/qwen.yaml", `platform.llm/traffic-prompt-tokens: "1500"`, `platform.llm/traffic-prompt-tokens: "34000"`)
	commit("qwen's prompts grow to 34,000 tokens")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		var got []string
		for _, v := range env.Violations {
			switch v.Rule {
			case "vllm-max-num-seqs":
				got = append(got, v.Object)
				assert.Contains(t, v.Message, "more than the cache holds", env.Env)
				t.Logf("%s: %s", env.Env, v.Message)
			case "capacity-kv-cache":
				t.Errorf("%s: the worst-case rule should pass: %s", env.Env, v.Message)
			}
		}
		assert.Equal(t, []string{"Deployment llm-inference/vllm-qwen"}, got, env.Env)
	}
	prod := res.Envs[0]
	for _, v := range prod.Violations {
		if v.Rule == "vllm-max-num-seqs" {
			assert.Contains(t, v.Message, "--max-num-seqs 13 × 34,400 tokens (34,000 prompt + 400 response in blocks of 16) = 447,200 of 436,352 KV tokens")
		}
	}
}

// TestCheckMaxNumSeqsOnHead: the repository's rendered overlays pass rule vllm-max-num-seqs in
// every env; the check reports each vLLM Deployment's use of its KV cache (the numbers of the
// comments beside --max-num-seqs in base/vllm and overlays/dev) and warns where --max-model-len
// holds the setting under half of what the profile allows.
func TestCheckMaxNumSeqsOnHead(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.4.3")
	commit("an unrelated change")
	res := runCheck(t, dir)
	assert.True(t, res.Passed)
	type row struct {
		seqs, used, kv, profile, fullLength int64
	}
	qwen := row{13, 13 * 1904, 436352, 229, 13}
	llama := row{11, 11 * 1600, 184576, 115, 11}
	want := map[string]map[string]row{
		"prod":    {"Deployment llm-inference/vllm-qwen": qwen, "Deployment llm-inference/vllm-qwen-canary": qwen, "Deployment llm-inference/vllm-llama": llama},
		"staging": {"Deployment llm-inference/vllm-qwen": qwen, "Deployment llm-inference/vllm-llama": llama},
		// T4: 285,520 and 268,624 KV tokens; at --max-model-len 8192, 34 and 32 sequences fit.
		"dev": {"Deployment llm-inference/vllm-qwen": {34, 34 * 1904, 285520, 149, 34}, "Deployment llm-inference/vllm-llama": {32, 32 * 1600, 268624, 167, 32}},
	}
	for _, env := range res.Envs {
		got := map[string]row{}
		for _, u := range env.KVCache {
			got[u.Object] = row{u.MaxNumSeqs, u.UsedTokens, u.KVTokens, u.ProfileSeqs, u.FullLengthSeqs}
		}
		assert.Equal(t, want[env.Env], got, env.Env)
		var warned []string
		for _, w := range env.Warnings {
			if w.Rule == "vllm-max-num-seqs" {
				warned = append(warned, w.Object)
				t.Logf("%s: %s: %s", env.Env, w.Object, w.Message)
				assert.Contains(t, w.Message, "holds it down", env.Env)
			}
		}
		assert.Len(t, warned, len(want[env.Env]), "%s: %v", env.Env, warned)
		var text bytes.Buffer
		WriteKVCache(&text, env.KVCache, false)
		assert.Equal(t, len(want[env.Env]), strings.Count(text.String(), "KV-CACHE "), env.Env)
	}
}
