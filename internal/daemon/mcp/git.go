package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/ledger"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// CheckInput asks the check tool about a change.
type CheckInput struct {
	Base string `json:"base" jsonschema:"the base revision, e.g. origin/main"`
	Head string `json:"head,omitempty" jsonschema:"the head revision (default HEAD)"`
}

// LedgerAtInput asks what served in an env at a time.
type LedgerAtInput struct {
	Env string `json:"env" jsonschema:"the environment"`
	At  string `json:"at,omitempty" jsonschema:"a time, RFC 3339 (default now)"`
}

// SchedulePlanInput asks for the next firings of an env's schedule.
type SchedulePlanInput struct {
	Env      string `json:"env" jsonschema:"the environment (reads clusters/<env>/schedule.yaml)"`
	Revision string `json:"revision,omitempty" jsonschema:"the Git revision to read (default HEAD)"`
	Count    int    `json:"count,omitempty" jsonschema:"how many firings, 1 to 400 (default 10)"`
	From     string `json:"from,omitempty" jsonschema:"plan from this time, RFC 3339 (default now)"`
}

// SchedulePlan is the answer of schedule_plan.
type SchedulePlan struct {
	Env      string                   `json:"env"`
	Revision string                   `json:"revision"`
	Firings  []schedule.PlannedFiring `json:"firings"`
}

// CapacityInput asks for the KV cache arithmetic of `auditor capacity kv`.
type CapacityInput struct {
	Layers        int64   `json:"layers" jsonschema:"transformer layers"`
	KVHeads       int64   `json:"kvHeads" jsonschema:"key/value heads"`
	HeadDim       int64   `json:"headDim" jsonschema:"head dimension"`
	DType         string  `json:"dtype,omitempty" jsonschema:"KV cache dtype: fp16 (default), bf16, fp8, int8 or fp32"`
	ContextTokens int64   `json:"contextTokens" jsonschema:"tokens per conversation; --max-model-len for the vLLM check"`
	FreeMemory    string  `json:"freeMemory,omitempty" jsonschema:"GPU memory left for the KV cache, e.g. 10GiB"`
	GPUMemory     string  `json:"gpuMemory,omitempty" jsonschema:"memory of one card, for the vLLM check"`
	WeightsSize   string  `json:"weightsSize,omitempty" jsonschema:"weights in GPU memory, for the vLLM check"`
	Utilization   float64 `json:"gpuMemoryUtilization,omitempty" jsonschema:"vLLM --gpu-memory-utilization (default 0.9)"`
	MaxNumSeqs    int64   `json:"maxNumSeqs,omitempty" jsonschema:"vLLM --max-num-seqs, for the vLLM check"`
}

func (t *tools) addGit(s *sdk.Server, on func(string) bool) {
	if on("check") {
		sdk.AddTool(s, readOnly("check", "Check a change",
			"What a pull request must pass, as auditor check computes it: each env's rendered changes from base to head, "+
				"the violations of the admission policies and invariants, each pinned env at its pin and at its next promotion.", schemaOf[check.Result]()), t.check)
	}
	if on("ledger_at") {
		sdk.AddTool(s, readOnly("ledger_at", "Models served at a time",
			"What served in an env at a time, from the model ledger in Git: each model version, its weights, its share of the traffic, its warm replicas.", schemaOf[ledger.Served]()), t.ledgerAt)
	}
	if on("schedule_plan") {
		sdk.AddTool(s, readOnly("schedule_plan", "Next scheduled scale-ups",
			"The next firings of an env's schedule of traffic peaks, with the lead time and the change each would commit.", schemaOf[SchedulePlan]()), t.schedulePlan)
	}
	if on("capacity") {
		sdk.AddTool(s, readOnly("capacity", "KV cache arithmetic",
			"KV cache per token and per conversation, how many conversations fit in the free memory, or whether a vLLM configuration fits its card.", schemaOf[capacity.KVResult]()), t.capacity)
	}
}

// checking holds one slot per check running in this process: a check reads two commits' files
// and renders every env (seconds, a few hundred MiB), and cannot be cancelled.
var checking = make(chan struct{}, 1)

func (t *tools) check(ctx context.Context, _ *sdk.CallToolRequest, in CheckInput) (*sdk.CallToolResult, *check.Result, error) {
	if in.Base == "" {
		return nil, nil, errors.New("base is required")
	}
	select { // check.Run takes no context: bound how many run, process-wide
	case checking <- struct{}{}:
		defer func() { <-checking }()
	default:
		return nil, nil, errors.New("another check is running in this server: ask again when it ends")
	}
	repo, err := t.repo(ctx)
	if err != nil {
		return nil, nil, err
	}
	res, err := check.Run(repo, in.Base, in.Head)
	if res == nil {
		return nil, nil, err
	}
	return nil, res, nil // an env that could not be checked is named in the result's errors
}

func (t *tools) ledgerAt(ctx context.Context, _ *sdk.CallToolRequest, in LedgerAtInput) (*sdk.CallToolResult, ledger.Served, error) {
	at, err := timeOr(in.At, "at")
	if err != nil || in.Env == "" {
		return nil, ledger.Served{}, errors.Join(err, requiredEnv(in.Env))
	}
	repo, err := t.repo(ctx)
	if err != nil {
		return nil, ledger.Served{}, err
	}
	if err := knownEnv(repo, in.Env); err != nil {
		return nil, ledger.Served{}, err
	}
	recs, err := ledger.Read(repo, in.Env, "")
	if err != nil {
		return nil, ledger.Served{}, err
	}
	return nil, ledger.At(recs, in.Env, at), nil
}

func (t *tools) schedulePlan(ctx context.Context, _ *sdk.CallToolRequest, in SchedulePlanInput) (*sdk.CallToolResult, SchedulePlan, error) {
	from, err := timeOr(in.From, "from")
	if err != nil || in.Env == "" {
		return nil, SchedulePlan{}, errors.Join(err, requiredEnv(in.Env))
	}
	count := in.Count
	switch {
	case count == 0:
		count = 10
	case count < 0 || count > maxFirings:
		return nil, SchedulePlan{}, fmt.Errorf("count: want 1 to %d firings, not %d", maxFirings, count)
	}
	repo, err := t.repo(ctx)
	if err != nil {
		return nil, SchedulePlan{}, err
	}
	if err := knownEnv(repo, in.Env); err != nil {
		return nil, SchedulePlan{}, err
	}
	snap, err := repo.Snapshot(in.Revision)
	if err != nil {
		return nil, SchedulePlan{}, err
	}
	sched, err := schedule.Load(snap, in.Env)
	if err != nil {
		return nil, SchedulePlan{}, fmt.Errorf("%s at %s: %w", schedule.Path(in.Env), snap.Revision, err)
	}
	out := SchedulePlan{Env: in.Env, Revision: snap.Revision, Firings: []schedule.PlannedFiring{}}
	for _, f := range sched.Plan(from, count) {
		out.Firings = append(out.Firings, sched.Describe(f, snap))
	}
	return nil, out, nil
}

func (t *tools) capacity(_ context.Context, _ *sdk.CallToolRequest, in CapacityInput) (*sdk.CallToolResult, capacity.KVResult, error) {
	dtype := in.DType
	if dtype == "" {
		dtype = "fp16"
	}
	kv := capacity.KVInput{Model: capacity.Model{Layers: in.Layers, KVHeads: in.KVHeads, HeadDim: in.HeadDim, DType: dtype},
		ContextTokens: in.ContextTokens}
	vllm := in.GPUMemory != "" || in.WeightsSize != "" || in.MaxNumSeqs != 0
	switch {
	case vllm && in.FreeMemory != "":
		return nil, capacity.KVResult{}, errors.New("freeMemory and the vLLM check (gpuMemory, weightsSize, maxNumSeqs) exclude each other")
	case vllm:
		gpu, err1 := capacity.ParseBytes(in.GPUMemory)
		weights, err2 := capacity.ParseBytes(in.WeightsSize)
		if err := errors.Join(err1, err2); err != nil || in.MaxNumSeqs <= 0 {
			return nil, capacity.KVResult{}, fmt.Errorf("the vLLM check needs gpuMemory, weightsSize and a positive maxNumSeqs: %v", err)
		}
		util := in.Utilization
		if util == 0 {
			util = 0.9
		}
		kv.VLLM = &capacity.VLLMConfig{GPUMemoryBytes: gpu, WeightsBytes: weights, GPUMemoryUtilization: util, MaxNumSeqs: in.MaxNumSeqs}
	case in.FreeMemory != "":
		free, err := capacity.ParseBytes(in.FreeMemory)
		if err != nil {
			return nil, capacity.KVResult{}, fmt.Errorf("freeMemory: %w", err)
		}
		kv.FreeMemoryBytes = &free
	}
	res, err := capacity.KV(kv)
	return nil, res, err
}

// maxFirings bounds one schedule_plan answer: a year of daily peaks.
const maxFirings = 400

// timeOr parses an RFC 3339 time; now when s is empty.
func timeOr(s, name string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time (2025-03-01T12:00:00Z): %w", name, err)
	}
	return t, nil
}

// knownEnv says whether env is one of the repository's envs at HEAD (its layout), naming them
// when it is not.
func knownEnv(repo *gitrepo.Repo, env string) error {
	src, err := render.AtRevision(repo, "HEAD")
	if err != nil {
		return err
	}
	l, err := layout.Read(src)
	if err != nil {
		return err
	}
	if !slices.Contains(l.Names(), env) {
		return fmt.Errorf("unknown env %q (known envs: %s)", env, strings.Join(l.Names(), ", "))
	}
	return nil
}

func requiredEnv(env string) error {
	if env == "" {
		return errors.New("env is required")
	}
	return nil
}
