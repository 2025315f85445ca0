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
		wide         bool
		width, max   int
		subject      string // "" for none
		wantRevision bool
	}{
		{false, 160, 160, "a very long commit subject a very long commit sub…", false},
		{false, 140, 140, "a very long commit subject a very long commit…", false}, // what the other columns leave
		{false, 120, 120, "a very long commit subjec…", false},
		{false, 100, 100, "", false}, // too little left: below the row
		{true, 0, 350, "a very long commit subject a very long commit sub…", true},
	} {
		var b strings.Builder
		require.NoError(t, recordTable(&b, []ledger.Record{rec}, tc.wide, tc.width))
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if tc.subject != "" {
			require.Len(t, lines, 2)
			assert.True(t, strings.HasSuffix(lines[0], "SUBJECT"), "SUBJECT is the last column: %s", lines[0])
			assert.True(t, strings.HasSuffix(lines[1], tc.subject), "width %d: %s", tc.width, lines[1])
		} else {
			require.Len(t, lines, 3)
			assert.NotContains(t, lines[0], "SUBJECT", "width %d", tc.width)
			assert.True(t, strings.HasPrefix(lines[2], "  └ a very long commit subject a very long"), "the subject below its row: %s", lines[2])
		}
		assert.Equal(t, tc.wantRevision, strings.Contains(lines[0], "REVISION"), "width %d: %s", tc.width, lines[0])
		for _, l := range lines {
			assert.LessOrEqual(t, len([]rune(l)), tc.max, "wide=%v width %d: %s", tc.wide, tc.width, l)
		}
	}
}
