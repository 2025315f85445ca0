package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/platform/ledger"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLedgerAndRollbackCommands(t *testing.T) {
	l := newLedgerRepo(t)
	url := "file://" + l.bare

	// rebuild --dry-run prints the records of the first commit and writes nothing.
	out, err := runCmd(t, newLedgerCommand(), "rebuild", "--repo", url, "--env", "prod", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.Parse("stdout", []byte(out))
	if err != nil || len(recs) != 3 {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if out, err := runCmd(t, newLedgerCommand(), "list", "--repo", url, "-o", "json"); err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list before any write: %v %q", err, out)
	}

	// rebuild writes; a second rebuild has nothing to change.
	if out, err = runCmd(t, newLedgerCommand(), "rebuild", "--repo", url, "--env", "prod"); err != nil || !strings.Contains(out, "3 records, commit ") {
		t.Fatalf("rebuild: %v %q", err, out)
	}
	if out, err = runCmd(t, newLedgerCommand(), "rebuild", "--repo", url, "--env", "prod"); err != nil || !strings.Contains(out, "up to date") {
		t.Fatalf("rebuild again: %v %q", err, out)
	}

	l.setCanary("50", "50")
	c2 := l.commit("prod: qwen canary 50%")
	head := l.git(time.Now(), "--git-dir", l.bare, "rev-parse", "main")
	out, err = runCmd(t, newLedgerCommand(), "sync", "--repo", url, "--env", "prod", "--dry-run")
	require.NoError(t, err)
	assert.Contains(t, out, "2 records would be appended (dry run: commit")
	assert.Contains(t, out, "changed (share)", "the dry run lists the records")
	assert.Equal(t, head, l.git(time.Now(), "--git-dir", l.bare, "rev-parse", "main"), "sync --dry-run pushed")
	if out, err = runCmd(t, newLedgerCommand(), "sync", "--repo", url, "--env", "prod"); err != nil || !strings.Contains(out, "2 records appended") {
		t.Fatalf("sync: %v %q", err, out)
	}

	// list: text, json, --model.
	out, err = runCmd(t, newLedgerCommand(), "list", "--repo", url, "--env", "prod")
	if err != nil || strings.Count(out, "\n")-strings.Count(out, "\n  └ ") != 6 || !strings.Contains(out, "changed (share)") || !strings.Contains(out, "prod: qwen canary 50%") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), tableWidth, "a table in a pipe: %s", line)
	}
	// -o wide: the same rows with the namespace, weights, image, author and sync time.
	wide, err := runCmd(t, newLedgerCommand(), "list", "--repo", url, "--env", "prod", "-o", "wide")
	require.NoError(t, err)
	wideLines, textLines := strings.Split(strings.TrimSpace(wide), "\n"), strings.Split(strings.TrimSpace(out), "\n")
	textLines = slices.DeleteFunc(textLines, func(l string) bool { return strings.HasPrefix(l, "  └ ") }) // subjects below their rows
	require.Len(t, wideLines, len(textLines))
	assert.True(t, strings.HasSuffix(wideLines[0], "SYNCED  SUBJECT"), wideLines[0])
	for _, col := range []string{"NAMESPACE", "WEIGHTS", "IMAGE", "AUTHOR"} {
		assert.Contains(t, wideLines[0], col)
	}
	assert.Contains(t, wide, "vllm/vllm-openai:", "the image column")
	assert.Contains(t, wide, "prod: qwen canary 50%", "the subject")
	var list []ledger.Record
	out, err = runCmd(t, newLedgerCommand(), "list", "--repo", url, "--model", "llama", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Deployment != "vllm-llama" {
		t.Fatalf("list --model llama: %v\n%s", err, out)
	}

	// at: between the commits, and after.
	var served ledger.Served
	out, err = runCmd(t, newLedgerCommand(), "at", "--repo", url, "--env", "prod", "--at", "2025-03-01T09:30:00Z", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &served) != nil || len(served.Models) != 3 || served.Models[2].SharePercent != 10 {
		t.Fatalf("at 09:30: %v\n%s", err, out)
	}
	out, err = runCmd(t, newLedgerCommand(), "at", "--repo", url, "--env", "prod", "--time", "2025-03-01 10:00")
	if err != nil || !strings.Contains(out, "revision "+c2[:12]) || !strings.Contains(out, "vllm-qwen-canary  bb46c15  50%") {
		t.Fatalf("at 10:00: %v\n%s", err, out)
	}

	// show by id (and by prefix), text and json.
	out, err = runCmd(t, newLedgerCommand(), "show", "--repo", url, list[0].ID[:6])
	if err != nil || !strings.Contains(out, "deployment: llm-inference/vllm-llama") || !strings.Contains(out, "share:      100 %") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	var one ledger.Record
	if out, err = runCmd(t, newLedgerCommand(), "show", "--repo", url, list[0].ID, "-o", "json"); err != nil || json.Unmarshal([]byte(out), &one) != nil || one.ID != list[0].ID {
		t.Fatalf("show json: %v\n%s", err, out)
	}

	// rollback of the 50 % step: a revert commit, then rollback records in the ledger.
	var rb struct {
		Revert  string          `json:"revert"`
		Records []ledger.Record `json:"records"`
	}
	head = l.git(time.Now(), "--git-dir", l.bare, "rev-parse", "main")
	var dry struct {
		Revert  string          `json:"revert"`
		DryRun  bool            `json:"dryRun"`
		Records []ledger.Record `json:"records"`
	}
	out, err = runCmd(t, newRollbackCommand(), c2, "--repo", url, "--env", "prod", "-o", "json", "--dry-run")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &dry), out)
	assert.True(t, dry.DryRun)
	assert.Len(t, dry.Revert, 40)
	assert.Len(t, dry.Records, 2, "the dry run computes the rollback records on the unpushed revert")
	assert.Equal(t, head, l.git(time.Now(), "--git-dir", l.bare, "rev-parse", "main"), "rollback --dry-run pushed")
	out, err = runCmd(t, newRollbackCommand(), c2, "--repo", url, "--env", "prod", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &rb) != nil || len(rb.Revert) != 40 || len(rb.Records) != 2 {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	for _, r := range rb.Records {
		if r.Kind != ledger.KindRollback || r.Reverts != c2 || r.Revision != rb.Revert {
			t.Errorf("rollback record %+v", r)
		}
	}
	// The work tree pulled sees the same ledger (read from a directory).
	l.git(time.Now(), "pull", "-q", "--ff-only", "origin", "main")
	out, err = runCmd(t, newLedgerCommand(), "list", "--repo", l.work, "--env", "prod")
	if err != nil || strings.Count(out, "rollback/changed (share)") != 2 || !strings.Contains(out, "reverts "+c2[:12]) {
		t.Fatalf("list after rollback: %v\n%s", err, out)
	}
	// Rebuild over the history agrees with the written ledger.
	out, err = runCmd(t, newLedgerCommand(), "rebuild", "--repo", url, "--env", "prod", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	written, _ := runCmd(t, newLedgerCommand(), "list", "--repo", url, "--env", "prod", "-o", "json")
	var w []ledger.Record
	if err := json.Unmarshal([]byte(written), &w); err != nil {
		t.Fatal(err)
	}
	wl, _ := ledger.Marshal(ledger.Derived(w))
	if out != string(wl) {
		t.Fatalf("rebuild:\n%s\nledger:\n%s", out, wl)
	}

	// Rolling back the same commit again: already reverted... git refuses nothing, ours says NoChange.
	if out, err = runCmd(t, newRollbackCommand(), c2, "--repo", url, "--env", "prod"); err != nil || !strings.Contains(out, "already reverted") {
		t.Fatalf("second rollback: %v\n%s", err, out)
	}

	// Usage errors are exit code 2.
	for _, args := range [][]string{
		{"at", "--repo", url},
		{"at", "--repo", url, "--env", "prod", "--at", "yesterday"},
		{"show", "--repo", url, "nope"},
		{"list", "--repo", url, "-o", "bogus"},
		{"rebuild", "--repo", url},
		{"frobnicate"},
	} {
		if _, err := runCmd(t, newLedgerCommand(), args...); exitCode(err) != 2 {
			t.Errorf("ledger %v: %v (code %d)", args, err, exitCode(err))
		}
	}
	if _, err := runCmd(t, newRollbackCommand(), "0000000000000000000000000000000000000000", "--repo", url); exitCode(err) != 2 {
		t.Errorf("rollback of an unknown commit: %v", err)
	}
}
