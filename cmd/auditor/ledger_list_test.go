package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// TestRecordTableWidth: a commit subject of hundreds of characters, a long image and author are
// clipped, so ledger list's rows (text and wide) keep their width whatever the history says.
func TestRecordTableWidth(t *testing.T) {
	long := strings.Repeat("a very long commit subject ", 25)
	rec := ledger.Record{ID: "a003ddb573ee", CommittedAt: time.Date(2026, 11, 29, 22, 25, 40, 0, time.UTC), Env: "prod",
		Kind: "added", Model: "llama", Deployment: "vllm-llama", Version: "0e9e39f", SharePercent: 100, Replicas: 1,
		Revision: "69518b64c824aaaa", Subject: long, Namespace: "llm-inference",
		WeightsURI: "s3://models/meta-llama/Llama-3.1-8B-Instruct-with-a-long-name", Image: "registry.example.com/vllm/vllm-openai:v0.11.0-with-a-long-tag",
		Author: "Seed maintainers <maintainers@users.noreply.a-very-long-host.example>"}
	for _, tc := range []struct {
		wide bool
		max  int
	}{{false, 160}, {true, 330}} {
		var b strings.Builder
		require.NoError(t, recordTable(&b, []ledger.Record{rec}, tc.wide))
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		require.Len(t, lines, 2)
		assert.True(t, strings.HasSuffix(lines[0], "SUBJECT"), "SUBJECT is the last column: %s", lines[0])
		assert.Contains(t, lines[1], "a very long commit subject a very long commit sub…")
		for _, l := range lines {
			assert.LessOrEqual(t, len([]rune(l)), tc.max, "wide=%v: %s", tc.wide, l)
		}
	}
}
