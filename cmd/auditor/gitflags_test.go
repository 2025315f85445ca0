package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A command that writes to a remote clones it onto disk, in a temporary directory (a git
// repository there: its pack on disk), and main's cleanup removes it.
func TestCommandsCloneOntoDiskAndCleanUp(t *testing.T) {
	gitOpts.cleanup()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	l, _ := pinnedLedgerRepo(t)
	out, err := runCmd(t, newPromoteCommand(), "--repo", "file://"+l.bare, "--from", "dev", "--to", "staging", "--dry-run")
	require.NoError(t, err, out)
	packs, err := filepath.Glob(filepath.Join(tmp, "auditor-clone-*", "repo", "objects", "pack", "pack-*.pack"))
	require.NoError(t, err)
	assert.NotEmpty(t, packs, "the clone is on disk")
	gitOpts.cleanup()
	left, err := filepath.Glob(filepath.Join(tmp, "auditor-clone-*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}

// A command terminated while it clones (here from a server that never answers) removes its clone
// all the same, and exits as terminated by the signal.
func TestTerminatedCommandRemovesItsClone(t *testing.T) {
	asked := make(chan struct{}, 1)
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stall)
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "promote", "--repo", srv.URL+"/platform.git", "--from", "dev", "--to", "staging", "--git-timeout", "5m")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "TMPDIR="+tmp)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	select {
	case <-asked: // the clone has begun: its directory exists
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the command never asked the server: %s", stderr.String())
	}
	made, err := filepath.Glob(filepath.Join(tmp, "auditor-clone-*", "repo"))
	require.NoError(t, err)
	require.Len(t, made, 1, "the clone's directory while it clones")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, stderr.String())
	assert.Equal(t, 128+int(syscall.SIGTERM), exit.ExitCode())
	left, err := filepath.Glob(filepath.Join(tmp, "auditor-clone-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the clone is removed")
}
