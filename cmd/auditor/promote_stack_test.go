package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

// TestPromoteGPUStackSoak: a new AMI reaches staging at once, but prod only once staging's GPU
// stack ledger shows the triple healthy for the soak time (24h); --force --reason goes past it.
func TestPromoteGPUStackSoak(t *testing.T) {
	l, _ := pinnedLedgerRepo(t)
	url := "file://" + l.bare
	copyTree(t, l.work, gpustack.File)
	l.commit("the GPU stack table")
	edit := func(rel, old, new string) {
		t.Helper()
		p := filepath.Join(l.work, rel)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Contains(t, string(data), old, rel)
		require.NoError(t, os.WriteFile(p, []byte(strings.ReplaceAll(string(data), old, new)), 0o644))
	}
	// Moving prod onto the table changes no part of its triple: nothing to soak.
	out, err := runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "staging", "--direct")
	require.NoError(t, err, out)
	out, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "staging", "--to", "prod", "--direct")
	require.NoError(t, err, out)

	edit(gpustack.File, "amis:\n", "amis:\n  - {alias: al2023@v20261101, driver: \"580.200.01\", source: test}\n")
	edit(gpustack.File, "ami: al2023@v20260714", "ami: al2023@v20261101")
	edit("base/node-pools/nodeclass-gpu.yaml", "alias: al2023@v20260714", "alias: al2023@v20261101")
	newAMI := l.commit("GPU nodes: AMI v20261101")

	// staging takes it at once, and the check says which nodes drift and under which budgets.
	out, err = runCmd(t, newPromoteCommand(), "--repo", url, "--from", "dev", "--to", "staging", "--direct")
	require.NoError(t, err, out)
	assert.Contains(t, oneLine(out), "WARNING gpu-stack-drift NodePool gpu: NodePool gpu: its AMI moves al2023@v20260714 → al2023@v20261101, so Karpenter replaces every node of the pool by drift, within its disruption budgets (1 nodes; 0 nodes from \"0 5 * * 1-5\" for 14h (Empty, Drifted, Underutilized))")

	triple := "AMI al2023@v20261101 (driver 580.200.01), image sha256:8a69ffad015f (CUDA 13.0), GPU Operator v26.7.0"
	promoteProd := func(args ...string) (string, error) {
		return runCmd(t, newPromoteCommand(), append([]string{"--repo", url, "--from", "staging", "--to", "prod", "--direct"}, args...)...)
	}
	out, err = promoteProd()
	require.Error(t, err)
	assert.Contains(t, oneLine(out), "VIOLATION gpu-stack-soak clusters/gpu-stack.yaml envs.prod: prod would run "+triple+", which staging has never run healthy (clusters/staging/gpu-stack-ledger.jsonl)")
	assert.Contains(t, oneLine(out), "promotion refused")

	// Staging's GPU nodes run the new AMI and its vLLM Deployments are available: say so.
	healthy := func(ago time.Duration) {
		t.Helper()
		at := time.Now().Add(-ago).UTC().Truncate(time.Second)
		out, err := runCmd(t, newLedgerCommand(), "stack", "--repo", url, "--env", "staging", "--healthy-at", at.Format(time.RFC3339))
		require.NoError(t, err, out)
		assert.Contains(t, oneLine(out), "clusters/staging/gpu-stack-ledger.jsonl: "+triple+" healthy since "+at.Format(time.RFC3339))
	}
	// A record staging cannot have earned is refused: in the future, or before its revision.
	for _, at := range []string{time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "2000-01-01T00:00:00Z"} {
		out, err := runCmd(t, newLedgerCommand(), "stack", "--repo", url, "--env", "staging", "--healthy-at", at)
		require.Error(t, err, out)
		assert.Regexp(t, `--healthy-at \S+ is (in the future|before staging's revision \w+ was committed)`, out+err.Error())
	}
	healthy(time.Hour)
	out, err = promoteProd()
	require.Error(t, err)
	assert.Contains(t, oneLine(out), "which staging has run healthy since ")
	assert.Contains(t, oneLine(out), "1h0m0s of the 24h0m0s soak: wait until ")
	out, err = promoteProd("--dry-run", "--force", "--reason", "INC-4711: the old AMI's kernel is vulnerable")
	require.NoError(t, err, out)
	assert.Contains(t, oneLine(out), "forced past 1 violation: INC-4711")

	// A day later (recorded as such: the test does not wait), the soak is over.
	healthy(25 * time.Hour)
	out, err = promoteProd()
	require.NoError(t, err, out)
	assert.Contains(t, oneLine(out), "check prod at "+gitrepo.Short(newAMI)+": 0 violations")
	bare, err := gitrepo.Open(url)
	require.NoError(t, err)
	rev, err := release.RevisionAt(bare, "prod", "main")
	require.NoError(t, err)
	assert.Equal(t, newAMI, rev, "prod runs the new triple")
}

// oneLine is s with every run of white space one space: check wraps its findings to a width.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
