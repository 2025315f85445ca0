package check

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/platform/capacity"
)

// The traffic profile a vLLM Deployment states: p95 prompt and response lengths in tokens.
const (
	trafficPromptAnnotation   = "platform.llm/traffic-prompt-tokens"
	trafficResponseAnnotation = "platform.llm/traffic-response-tokens"
)

// underUsed is the share of what the profile allows below which --max-num-seqs is reported as
// under-sized: a full batch would leave more than half of the KV cache idle.
const underUsed = 0.5

// KVCacheUse is how much of a vLLM Deployment's KV cache its --max-num-seqs can use at the
// Deployment's stated traffic profile (rule vllm-max-num-seqs).
type KVCacheUse struct {
	// Object is the Deployment, "Deployment <namespace>/<name>".
	Object string `json:"object"`
	// MaxNumSeqs is --max-num-seqs.
	MaxNumSeqs int64 `json:"maxNumSeqs"`
	// SeqTokens is one sequence of the profile, prompt + response in whole KV blocks.
	SeqTokens int64 `json:"seqTokens"`
	// UsedTokens is MaxNumSeqs × SeqTokens.
	UsedTokens int64 `json:"usedTokens"`
	// KVTokens is the KV cache in tokens after the weights and the overhead estimate.
	KVTokens int64 `json:"kvTokens"`
	// Percent is UsedTokens / KVTokens in percent.
	Percent float64 `json:"percent"`
	// ProfileSeqs is how many sequences of the profile the KV cache holds.
	ProfileSeqs int64 `json:"profileSeqs"`
	// FullLengthSeqs is how many sequences at --max-model-len the KV cache holds after the
	// overhead (capacity.FullLengthSeqs: rule capacity-kv-cache and `auditor capacity kv` count
	// the same): above it, long requests are preempted.
	FullLengthSeqs int64 `json:"fullLengthSeqs"`
	// Source is where the profile's lengths came from: "annotations" or "measured profile".
	Source string `json:"source"`
}

// SeqsConfigOf reads the sizing inputs of --max-num-seqs from a vLLM Deployment: the model facts
// and the traffic profile from its annotations, the vLLM flags from its first container's args.
func SeqsConfigOf(o *unstructured.Unstructured) capacity.SeqsConfig {
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	var args map[string]string
	if len(cs) > 0 {
		args = flags(asMap(cs[0])["args"])
	}
	ann := o.GetAnnotations()
	return capacity.SeqsConfig{
		VLLM:                vllmConfig(ann, args),
		MaxNumBatchedTokens: num(args["--max-num-batched-tokens"]),
		BlockSize:           num(args["--block-size"]),
		Traffic:             capacity.Traffic{PromptTokens: num(ann[trafficPromptAnnotation]), ResponseTokens: num(ann[trafficResponseAnnotation])},
		Overhead:            capacity.DefaultOverhead(),
	}
}

// vllmMaxNumSeqs checks each vLLM Deployment's --max-num-seqs against its stated traffic profile
// (annotations platform.llm/traffic-prompt-tokens and traffic-response-tokens): a full batch of
// the profile must fit in the KV cache left after the weights and the activation/CUDA graph
// overhead estimate (capacity.DefaultOverhead), or vLLM preempts whenever the batch is full.
// A missing profile is a violation too. A setting that uses under half of what the profile
// allows is a warning, saying whether --max-model-len holds it down. Each
// Deployment's use of its KV cache is returned for the report. Rule vllm-max-num-seqs.
//
// A measured profile (clusters/<env>/profiles/<model>.yaml, by `auditor profile`) of the
// Deployment, in measured keyed by its namespace/name, takes the annotations' place: its p95 lengths,
// rounded up. KVCacheUse.Source says which was used.
func vllmMaxNumSeqs(objs []*unstructured.Unstructured, measured map[string]capacity.Traffic) (uses []KVCacheUse, violations, warnings []Violation) {
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetAnnotations()["platform.llm/model"] == "" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(cs) == 0 {
			continue
		}
		add := func(to *[]Violation, format string, a ...any) {
			*to = append(*to, Violation{Rule: "vllm-max-num-seqs", Object: id(o), Message: fmt.Sprintf(format, a...)})
		}
		cfg := SeqsConfigOf(o)
		source := "annotations"
		if tr, ok := measured[o.GetNamespace()+"/"+o.GetName()]; ok {
			cfg.Traffic, source = tr, "measured profile"
		}
		if cfg.Traffic.PromptTokens <= 0 || cfg.Traffic.ResponseTokens <= 0 {
			add(&violations, "no traffic profile: state the p95 prompt and response lengths in tokens (annotations %s, %s) to size --max-num-seqs",
				trafficPromptAnnotation, trafficResponseAnnotation)
			continue
		}
		fit, err := capacity.SizeMaxNumSeqs(cfg)
		if err != nil {
			continue // the model facts are capacity-kv-cache's to report
		}
		use := KVCacheUse{Object: id(o), MaxNumSeqs: cfg.VLLM.MaxNumSeqs, SeqTokens: fit.SeqTokens, UsedTokens: fit.UsedTokens,
			KVTokens: fit.KVTokens, Percent: 100 * fit.UsedFraction, ProfileSeqs: fit.ProfileSeqs, Source: source}
		if n, err := capacity.FullLengthSeqs(cfg); err == nil {
			use.FullLengthSeqs = n
		}
		uses = append(uses, use)
		switch {
		case !fit.Fits:
			add(&violations, "%s; lower --max-num-seqs to %d", fit.Explanation, fit.ProfileSeqs)
		case float64(use.MaxNumSeqs) < underUsed*float64(use.ProfileSeqs):
			why := fmt.Sprintf(". Up to %d, even a batch of requests at --max-model-len %d fits", use.FullLengthSeqs, cfg.VLLM.MaxModelLen)
			if use.MaxNumSeqs >= use.FullLengthSeqs {
				why = fmt.Sprintf(". --max-model-len %d holds it down: %d sequences at that length fill the cache (after the overhead, "+
					"as rule capacity-kv-cache counts); a larger batch preempts long requests when they come together, a lower --max-model-len avoids it",
					cfg.VLLM.MaxModelLen, use.FullLengthSeqs)
			}
			add(&warnings, "under-sized for its traffic profile: %s%s", fit.Explanation, why)
		}
	}
	return uses, violations, warnings
}

// KVCacheUses is each vLLM Deployment's use of its KV cache among objs at the traffic profile its
// annotations state, as auditor check reports it.
func KVCacheUses(objs []*unstructured.Unstructured) []KVCacheUse {
	uses, _, _ := vllmMaxNumSeqs(objs, nil)
	return uses
}

// WriteKVCache prints, per vLLM Deployment, how much of its KV cache --max-num-seqs can use at
// its traffic profile: a table in markdown, one KV-CACHE line per Deployment in text, like the
// check's other sections.
func WriteKVCache(w io.Writer, uses []KVCacheUse, md bool) {
	if len(uses) == 0 {
		return
	}
	if md {
		fmt.Fprintln(w, "\n| vLLM Deployment | --max-num-seqs | × tokens per sequence | = of KV tokens | KV cache used | the profile allows | at --max-model-len |\n|---|---|---|---|---|---|---|")
	}
	for _, u := range uses {
		if md {
			fmt.Fprintf(w, "| `%s` | %d | %s | %s of %s | %.1f %% | %d | %d |\n", u.Object, u.MaxNumSeqs, capacity.Thousands(u.SeqTokens),
				capacity.Thousands(u.UsedTokens), capacity.Thousands(u.KVTokens), u.Percent, u.ProfileSeqs, u.FullLengthSeqs)
		} else {
			fmt.Fprintf(w, "  KV-CACHE %s max-num-seqs=%d × %s tokens = %s of %s KV tokens (%.1f %%); profile allows %d, %d at max-model-len%s\n",
				u.Object, u.MaxNumSeqs, capacity.Thousands(u.SeqTokens), capacity.Thousands(u.UsedTokens), capacity.Thousands(u.KVTokens),
				u.Percent, u.ProfileSeqs, u.FullLengthSeqs, sourceNote(u.Source))
		}
	}
}

// sourceNote names a measured profile as the source of a KV-CACHE line's lengths.
func sourceNote(source string) string {
	if source == "measured profile" {
		return " (p95 lengths of the measured profile)"
	}
	return ""
}
