package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRollbackHEAD: HEAD and HEAD~N name commits of --branch on the remote; a commit the branch
// does not have is said in the words of an unknown revision, exit 2.
func TestRollbackHEAD(t *testing.T) {
	l := newLedgerRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(l.work, "docs/runbooks/note.md"), []byte("a note\n"), 0o644))
	head := l.commit("docs: a note")
	url := "file://" + l.bare
	for _, rev := range []string{"HEAD", "HEAD~0"} {
		out, err := runCmd(t, newRollbackCommand(), rev, "--repo", url, "--dry-run", "-o", "json")
		require.NoError(t, err, "%s: %s", rev, out)
		var dry struct {
			Revert string `json:"revert"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &dry), out)
		assert.Len(t, dry.Revert, 40, rev)
	}
	before := l.git(time.Now(), "--git-dir", l.bare, "rev-parse", "main")
	assert.Equal(t, head, before, "the dry runs pushed nothing")

	code, msg := exitAndError(t, "rollback", "0123456789abcdef", "--repo", url, "--dry-run")
	assert.Equal(t, codeError, code)
	assert.Contains(t, msg, `revision "0123456789abcdef" not found on branch main of `+url)
}

// TestRollbackStartsNoLedger: a dry run of a docs commit on a repository whose envs keep no
// ledger lists no record (it used to list every env's history as the ledger sync would start
// it); --env starts that env's ledger, and only its.
func TestRollbackStartsNoLedger(t *testing.T) {
	l := newLedgerRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(l.work, "docs/runbooks/note.md"), []byte("a note\n"), 0o644))
	l.commit("docs: a note")
	url := "file://" + l.bare
	out, err := runCmd(t, newRollbackCommand(), "HEAD", "--repo", url, "--dry-run")
	require.NoError(t, err, out)
	assert.Contains(t, out, "no served model changed: no ledger record")
	for _, env := range []string{" dev ", " staging ", " prod "} {
		assert.NotContains(t, out, env, "no record of an env without a ledger")
	}
	out, err = runCmd(t, newRollbackCommand(), "HEAD", "--repo", url, "--dry-run", "--env", "prod")
	require.NoError(t, err, out)
	assert.Contains(t, out, " prod ", "--env starts its ledger")
	assert.NotContains(t, out, " dev ")
}
