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

// A command terminated while it clones (here from a server that never answers) stops, says why,
// removes its clone, and dies by the signal, as an unhandled one would end it (a shell script
// running it in a loop stops). A signal it was started with ignored (nohup) stays ignored.
func TestTerminatedCommandRemovesItsClone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nohup   bool
		signals []syscall.Signal
	}{
		{name: "SIGTERM", signals: []syscall.Signal{syscall.SIGTERM}},
		{name: "SIGHUP ignored under nohup, then SIGTERM", nohup: true, signals: []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM}},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			args := []string{"promote", "--repo", srv.URL + "/platform.git", "--from", "dev", "--to", "staging", "--git-timeout", "5m"}
			cmd := exec.Command(os.Args[0], args...)
			if tc.nohup { // as nohup starts it: SIGHUP ignored, which exec keeps
				cmd = exec.Command("sh", append([]string{"-c", `trap "" HUP; exec "$0" "$@"`, os.Args[0]}, args...)...)
			}
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
			made, err := filepath.Glob(filepath.Join(tmp, clonePrefix+"*", "repo"))
			require.NoError(t, err)
			require.Len(t, made, 1, "the clone's directory while it clones")
			signalled := time.Now()
			for _, s := range tc.signals {
				require.NoError(t, cmd.Process.Signal(s))
			}
			err = cmd.Wait()
			assert.Less(t, time.Since(signalled), signalGrace, "the command stopped when cancelled; it was not ended by the grace timer")
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, stderr.String())
			status := exit.Sys().(syscall.WaitStatus)
			assert.True(t, status.Signaled(), "exit status %d: %s", exit.ExitCode(), stderr.String())
			assert.Equal(t, syscall.SIGTERM, status.Signal())
			assert.Contains(t, stderr.String(), "context canceled", "the command says what stopped it")
			left, err := filepath.Glob(filepath.Join(tmp, clonePrefix+"*"))
			require.NoError(t, err)
			assert.Empty(t, left, "the clone is removed")
		})
	}
}

// The auditor process (main) removes its clones when a command ends normally.
func TestMainRemovesItsClonesAtExit(t *testing.T) {
	tmp := t.TempDir()
	l, _ := pinnedLedgerRepo(t)
	cmd := exec.Command(os.Args[0], "promote", "--repo", "file://"+l.bare, "--from", "dev", "--to", "staging", "--dry-run")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "promote dev → staging")
	left, err := filepath.Glob(filepath.Join(tmp, "auditor-clone-*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}

// A command whose output pipe is closed (`auditor … | head`) dies by SIGPIPE, as Go programs do,
// and cannot remove its clone; the next command removes it (nobody holds its lock), and leaves
// alone a clone whose process runs (its lock held) and one without a lock file yet.
func TestDeadProcessesClonesAreRemovedByTheNext(t *testing.T) {
	tmp := t.TempDir()
	l, _ := pinnedLedgerRepo(t)
	run := func(stdoutClosed bool) error {
		cmd := exec.Command(os.Args[0], "promote", "--repo", "file://"+l.bare, "--from", "dev", "--to", "staging", "--dry-run")
		cmd.Env = append(os.Environ(), runMainEnv+"=1", "TMPDIR="+tmp)
		if !stdoutClosed {
			return cmd.Run()
		}
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		require.NoError(t, out.Close()) // the reader is gone before the first line
		return cmd.Wait()
	}
	err := run(true)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, syscall.SIGPIPE, exit.Sys().(syscall.WaitStatus).Signal())
	dead, err := filepath.Glob(filepath.Join(tmp, clonePrefix+"*"))
	require.NoError(t, err)
	require.Len(t, dead, 1, "the clone of the process SIGPIPE killed")
	live := filepath.Join(tmp, clonePrefix+"live")
	require.NoError(t, os.Mkdir(live, 0o700))
	lock, err := lockClone(live) // as a running auditor holds it
	require.NoError(t, err)
	defer lock.Close()
	making := filepath.Join(tmp, clonePrefix+"making")
	require.NoError(t, os.Mkdir(making, 0o700))

	require.NoError(t, run(false))
	left, err := filepath.Glob(filepath.Join(tmp, clonePrefix+"*"))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{live, making}, left, "only the dead process' clone goes")
}
