package mcp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// thisRepo serves this repository's own history: its ledger, its schedules.
func thisRepo(t *testing.T) Options {
	repo, err := gitrepo.Open("../../..")
	require.NoError(t, err)
	return Options{Repo: func(context.Context) (*gitrepo.Repo, error) { return repo, nil }}
}

func TestLedgerAtIsTheLedgersAnswer(t *testing.T) {
	opts := thisRepo(t)
	cs := connect(t, opts)
	got, res := call[ledger.Served](t, cs, "ledger_at", map[string]any{"env": "prod"})
	require.False(t, res.IsError, errTextOf(res))
	repo, _ := opts.Repo(context.Background())
	recs, err := ledger.Read(repo, "prod", "")
	require.NoError(t, err)
	want := ledger.At(recs, "prod", got.At)
	assert.Equal(t, len(want.Models), len(got.Models))
	assert.Equal(t, want.Revision, got.Revision)
	require.NotEmpty(t, got.Models)

	_, res = call[ledger.Served](t, cs, "ledger_at", map[string]any{"env": "prod", "at": "yesterday"})
	assert.Contains(t, errText(t, res), "at: want an RFC 3339 time")
	_, res = call[ledger.Served](t, cs, "ledger_at", map[string]any{"at": "2026-01-01T00:00:00Z"})
	assert.Contains(t, errText(t, res), `missing properties: ["env"]`, "the input schema requires it")
}

func TestSchedulePlanGivesTheNextFirings(t *testing.T) {
	cs := connect(t, thisRepo(t))
	got, res := call[SchedulePlan](t, cs, "schedule_plan", map[string]any{"env": "prod", "count": 3, "from": "2026-12-07T00:00:00Z"})
	require.False(t, res.IsError, errTextOf(res))
	assert.Len(t, got.Firings, 3)
	assert.NotEmpty(t, got.Revision)
	_, res = call[SchedulePlan](t, cs, "schedule_plan", map[string]any{"env": "nope"})
	assert.Contains(t, errText(t, res), `unknown env "nope" (known envs: dev, prod, staging)`)
	_, res = call[SchedulePlan](t, cs, "ledger_at", map[string]any{"env": "nope"})
	assert.Contains(t, errText(t, res), `unknown env "nope" (known envs: dev, prod, staging)`)
	for _, n := range []int{-1, maxFirings + 1, 100000} { // a reader cannot make the server plan without bound
		_, res = call[SchedulePlan](t, cs, "schedule_plan", map[string]any{"env": "prod", "count": n})
		assert.Contains(t, errText(t, res), "count: want 1 to 400 firings", n)
	}
}

func TestCapacityIsCapacityKV(t *testing.T) {
	cs := connect(t, Options{})
	got, res := call[capacity.KVResult](t, cs, "capacity", map[string]any{"layers": 32, "kvHeads": 8, "headDim": 128, "contextTokens": 8000, "freeMemory": "10GiB"})
	require.False(t, res.IsError, errTextOf(res))
	free := int64(10 << 30)
	want, err := capacity.KV(capacity.KVInput{Model: capacity.Model{Layers: 32, KVHeads: 8, HeadDim: 128, DType: "fp16"}, ContextTokens: 8000, FreeMemoryBytes: &free})
	require.NoError(t, err)
	assert.Equal(t, want, got)

	got, res = call[capacity.KVResult](t, cs, "capacity", map[string]any{"layers": 32, "kvHeads": 8, "headDim": 128, "contextTokens": 16384,
		"gpuMemory": "48305799168", "weightsSize": "16060522496", "maxNumSeqs": 64})
	require.False(t, res.IsError, errTextOf(res))
	require.NotNil(t, got.VLLM)
	_, res = call[capacity.KVResult](t, cs, "capacity", map[string]any{"layers": 32, "kvHeads": 8, "headDim": 128, "contextTokens": 1, "freeMemory": "1Gi", "maxNumSeqs": 2})
	assert.Contains(t, errText(t, res), "exclude each other")
}

func TestCheckNamesAnUnknownRevision(t *testing.T) {
	cs := connect(t, thisRepo(t))
	_, res := call[check.Result](t, cs, "check", map[string]any{"base": "no-such-revision", "head": "HEAD"})
	assert.Contains(t, errText(t, res), "no-such-revision")
	got, res := call[check.Result](t, cs, "check", map[string]any{"base": "HEAD", "head": "HEAD"})
	require.False(t, res.IsError, errTextOf(res))
	head, err := gitrepo.Open("../../..")
	require.NoError(t, err)
	rev, err := head.Resolve("HEAD")
	require.NoError(t, err)
	assert.Equal(t, rev, got.Head)
	assert.NotEmpty(t, got.Envs)
	_, res = call[check.Result](t, cs, "check", map[string]any{"base": ""})
	assert.Contains(t, errText(t, res), "base is required")
}

func TestOneCheckAtATime(t *testing.T) {
	cs := connect(t, thisRepo(t))
	checking <- struct{}{} // a check running
	_, res := call[map[string]any](t, cs, "check", map[string]any{"base": "HEAD"})
	<-checking
	assert.Contains(t, errText(t, res), "another check is running")
}
