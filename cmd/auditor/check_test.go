package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
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
		writeCheck(&b, res, checkView{md: tc.md, verbose: true})
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
		writeCheck(&b, res, checkView{md: tc.md, verbose: true})
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
		writeCheck(&b, res, checkView{md: tc.md, verbose: true})
		for _, w := range tc.want {
			assert.Contains(t, b.String(), w)
		}
	}
}

// TestWriteCheckQuiet: without --verbose, check lists the warnings on objects the change touches,
// counts the others and the inherited violations by rule, leaves the inventory out, and wraps
// every line at the width; --verbose lists everything.
func TestWriteCheckQuiet(t *testing.T) {
	long := strings.Repeat("a long explanation of the finding ", 8)
	res := &check.Result{Base: "aaa", Head: "bbb", Passed: true, Envs: []check.EnvResult{{Env: "prod",
		Changes: []check.Change{{Kind: "Deployment", Namespace: "llm-inference", Name: "vllm-qwen", Change: "changed"}},
		Warnings: []check.Violation{
			{Rule: "vllm-max-num-seqs", Object: "Deployment llm-inference/vllm-qwen", Message: "under-sized: " + long},
			{Rule: "vllm-max-num-seqs", Object: "Deployment llm-inference/vllm-llama", Message: "under-sized"},
			{Rule: "namespace-pod-security", Object: "Namespace llm-monitoring", Message: "privileged"},
		},
		Inherited: []check.Violation{{Rule: "job-sync-again", Object: "Job a", Message: "x"}, {Rule: "job-sync-again", Object: "Job b", Message: "x"}},
		Security:  []check.NamespaceSecurity{{Namespace: "llm-api"}},
	}}}
	var quiet strings.Builder
	writeCheck(&quiet, res, checkView{width: 80})
	out := quiet.String()
	joined := strings.ReplaceAll(out, "\n    ", " ") // the wrapped lines, unwrapped
	assert.Contains(t, out, "  WARNING vllm-max-num-seqs Deployment llm-inference/vllm-qwen: under-sized:")
	assert.NotContains(t, out, "vllm-llama")
	assert.Contains(t, joined, "2 more warnings, on what this change leaves alone (vllm-max-num-seqs, namespace-pod-security)")
	assert.Contains(t, joined, "2 inherited violations, broken before this change (job-sync-again ×2); --verbose lists them")
	assert.NotContains(t, out, "SECURITY")
	for _, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 80, line)
	}

	var verbose strings.Builder
	writeCheck(&verbose, res, checkView{verbose: true, width: 80})
	for _, want := range []string{"  WARNING vllm-max-num-seqs (2):", "    Deployment llm-inference/vllm-llama: under-sized",
		"  WARNING namespace-pod-security Namespace llm-monitoring: privileged", "  INHERITED job-sync-again (2):", "  SECURITY llm-api"} {
		assert.Contains(t, verbose.String(), want)
	}
}

// TestWrap: lines break at spaces within the width, the rest indented; a word longer than the
// width stays whole; 0 does not wrap.
func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"  short", 20, "  short\n"},
		{"  one two three four five", 12, "  one two\n    three\n    four\n    five\n"},
		{"  averyveryverylongword x", 10, "  averyveryverylongword\n    x\n"},
		{"  one two three four five", 0, "  one two three four five\n"},
	} {
		assert.Equal(t, tc.want, wrap(tc.in, tc.width, "    "), tc.in)
	}
}

// TestPickListsWhatChangedOrIsAtRisk: the quiet view lists a warning on an object the change
// touches, on a file it edits, or at risk (once per env, and once across envs for the same
// message); it counts the rest.
func TestPickListsWhatChangedOrIsAtRisk(t *testing.T) {
	tch := touchedBy([]string{"overlays/prod/site/site.yaml", "clusters/prod/root.yaml"},
		[]check.Change{{Kind: "Deployment", Namespace: "llm-api", Name: "rag-api"}, {Kind: "Namespace", Name: "llm-api"}})
	apps := check.Violation{Rule: "application-renders", Object: "Application gpu-operator", Message: "not rendered", Risk: "its objects are not checked"}
	for _, tc := range []struct {
		name   string
		env    string
		seen   []check.Violation // listed already, in prod
		f      check.Violation
		listed bool
	}{
		{"changed object", "prod", nil, check.Violation{Rule: "replicas-spread", Object: "Deployment llm-api/rag-api"}, true},
		{"changed cluster-scoped object", "prod", nil, check.Violation{Rule: "namespace-pod-security", Object: "Namespace llm-api"}, true},
		{"object left alone", "prod", nil, check.Violation{Rule: "replicas-spread", Object: "Deployment llm-api/other"}, false},
		{"edited file", "prod", nil, check.Violation{Rule: "site-values", Object: "overlays/prod/site/site.yaml"}, true},
		{"edited file named as a file", "prod", nil, check.Violation{Rule: "site-values", Object: "file clusters/prod/root.yaml"}, true},
		{"file left alone", "staging", nil, check.Violation{Rule: "flows-allowed", Object: "base/network/flows.yaml"}, false},
		{"at risk", "prod", nil, apps, true},
		{"at risk, listed in another env", "dev", []check.Violation{apps}, apps, false},
		{"at risk, another message listed in another env", "dev", []check.Violation{apps},
			check.Violation{Rule: apps.Rule, Object: apps.Object, Message: "other", Risk: apps.Risk}, true},
		{"at risk, same object listed at the env's pin", "prod", []check.Violation{apps},
			check.Violation{Rule: apps.Rule, Object: apps.Object, Message: "other", Risk: apps.Risk}, false},
		{"changed and listed already", "prod", []check.Violation{{Rule: "site-values", Object: "overlays/prod/site/site.yaml"}},
			check.Violation{Rule: "site-values", Object: "overlays/prod/site/site.yaml"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := listed{}
			for _, s := range tc.seen {
				seen.add("prod", s)
			}
			shown, rest := tch.pick(tc.env, []check.Violation{tc.f}, seen)
			assert.Equal(t, tc.listed, len(shown) == 1, "listed")
			assert.Equal(t, !tc.listed, len(rest) == 1, "counted")
		})
	}
}

// TestWriteCheckQuietOnADocsChange: a change that touches no object lists the warnings at risk
// once, counts the rest, prints one GPU stack line for the envs that share it, and the Markdown
// comment folds what it leaves out (its reader cannot run --verbose).
func TestWriteCheckQuietOnADocsChange(t *testing.T) {
	apps := check.Violation{Rule: "application-renders", Object: "Application gpu-operator", Message: "not rendered", Risk: "its objects are not checked"}
	other := check.Violation{Rule: "namespace-pod-security", Object: "Namespace llm-monitoring", Message: "privileged"}
	stack := &gpustack.Triple{AMI: "al2023@v1", Driver: "580", Image: "sha256:" + strings.Repeat("a", 64), CUDA: "13.0", GPUOperator: "v26"}
	res := &check.Result{Base: "aaa", Head: "bbb", Passed: true, Paths: []string{"docs/platform.md"}, Envs: []check.EnvResult{
		{Env: "prod", Warnings: []check.Violation{apps, other}, GPUStack: stack},
		{Env: "dev", Warnings: []check.Violation{apps, other}, GPUStack: stack},
	}}
	var text strings.Builder
	writeCheck(&text, res, checkView{width: 100})
	out := text.String()
	assert.Equal(t, 1, strings.Count(out, "WARNING application-renders"), out)
	assert.Equal(t, 1, strings.Count(out, "GPU-STACK"), out)
	assert.Contains(t, out, "GPU-STACK of prod, dev: ami=al2023@v1")
	joined := strings.ReplaceAll(out, "\n    ", " ")
	assert.Contains(t, joined, "2 warnings, none on what this change touches (application-renders, namespace-pod-security); --verbose lists them")
	for _, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 100, line)
	}

	var md strings.Builder
	writeCheck(&md, res, checkView{md: true})
	assert.NotContains(t, md.String(), "--verbose")
	assert.Contains(t, md.String(), "<details><summary>1 more warning, on what this change leaves alone (namespace-pod-security)</summary>")
	assert.Contains(t, md.String(), "- :warning: **namespace-pod-security** `Namespace llm-monitoring`: privileged")
}

// TestWriteCheckVerboseWraps: the inventory --verbose adds (namespaces, GPU pools, KV cache)
// wraps at the width too.
func TestWriteCheckVerboseWraps(t *testing.T) {
	res := &check.Result{Base: "aaa", Head: "bbb", Passed: true, Envs: []check.EnvResult{{Env: "prod",
		GPUPools: []check.GPUPool{{Pool: "gpu", NodeClass: "gpu", RootVolume: "200Gi on /dev/xvda", AMI: "al2023@v20260714",
			Budgets: []string{"1 nodes", `0 nodes from "0 5 * * 1-5" for 14h (Empty, Drifted, Underutilized)`}, ExpireAfter: "Never"}},
		KVCache: []check.KVCacheUse{{Object: "Deployment llm-inference/vllm-qwen", MaxNumSeqs: 13, SeqTokens: 1904, UsedTokens: 24752,
			KVTokens: 436352, Percent: 5.67, ProfileSeqs: 229, FullLengthSeqs: 13}},
	}}}
	var b strings.Builder
	writeCheck(&b, res, checkView{verbose: true, width: 80})
	out := b.String()
	assert.Contains(t, out, "  GPU-POOL gpu node-class=gpu")
	assert.Contains(t, out, "  KV-CACHE Deployment llm-inference/vllm-qwen")
	for _, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 80, line)
	}
}
