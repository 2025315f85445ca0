//go:build linux

// Package hack_test tests the shell libraries of hack/lib that the scripts of hack/ source.
package hack_test

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// procsScript sources hack/lib/procs.sh ($1), starts the bash script $3 through procs_start (a
// child that forks a grandchild and writes both pids), then ends as $2 says: exit, an error
// under set -e, or waiting for a signal.
const procsScript = `set -eu
. "$1"
procs_start bash -c "$3"
while [ ! -s child.pid ] || [ ! -s gc.pid ]; do sleep 0.02; done
: > ready
case "$2" in
exit) exit 0 ;;
error) false ;;
wait) while :; do sleep 0.1; done ;;
esac
`

// The children procs_start runs: both fork a grandchild and write the two pids; the stubborn
// one, and its grandchild, ignore SIGTERM.
const (
	forking  = `sleep 300 & echo $! > gc.pid; echo $$ > child.pid; wait`
	stubborn = `trap "" TERM; sleep 300 & echo $! > gc.pid; echo $$ > child.pid; wait`
)

func TestProcsStopsChildAndGrandchild(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid (util-linux)")
	}
	lib, err := filepath.Abs(filepath.Join("lib", "procs.sh"))
	require.NoError(t, err)
	// Orphans are reparented to this process, which reaps them in gone: a container's init
	// may never reap, and a zombie still answers kill(pid, 0).
	require.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	// Under nohup SIGHUP is ignored, and the script would inherit that: bash cannot trap a
	// signal ignored on entry. A handler here is not inherited: the script starts with the default.
	if signal.Ignored(syscall.SIGHUP) {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}

	tests := []struct {
		name     string
		end      string         // the script's $2
		child    string         // the child's bash script; forking by default
		grace    string         // PROCS_GRACE; long by default, so a cleanup that waits it out fails
		signal   syscall.Signal // sent once the script is ready; 0 for none
		wantCode int
	}{
		{name: "normal exit", end: "exit", wantCode: 0},
		{name: "error under set -e", end: "error", wantCode: 1},
		{name: "SIGTERM", end: "wait", signal: syscall.SIGTERM, wantCode: 128 + 15},
		{name: "SIGINT", end: "wait", signal: syscall.SIGINT, wantCode: 128 + 2},
		{name: "SIGHUP", end: "wait", signal: syscall.SIGHUP, wantCode: 128 + 1},
		{name: "TERM ignored: KILL after the grace", end: "exit", child: stubborn, grace: "1", wantCode: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "script.sh")
			require.NoError(t, os.WriteFile(script, []byte(procsScript), 0o644))
			// A file, not a pipe: cmd.Wait then does not wait for a survivor holding the script's output.
			log, err := os.Create(filepath.Join(dir, "out.log"))
			require.NoError(t, err)
			defer log.Close()
			output := func() string { b, _ := os.ReadFile(log.Name()); return string(b) }
			child, grace := tt.child, tt.grace
			if child == "" {
				child = forking
			}
			if grace == "" {
				grace = "60"
			}
			cmd := exec.Command("bash", script, lib, tt.end, child)
			cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
			cmd.Env = append(os.Environ(), "PROCS_GRACE="+grace)
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { // a failed case leaves nothing running
				for _, f := range []string{"child.pid", "gc.pid"} {
					if pid, err := readPID(filepath.Join(dir, f)); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						gone(pid, 2*time.Second)
					}
				}
				_ = cmd.Process.Kill()
				<-done
			})

			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(dir, "ready"))
				return err == nil
			}, 10*time.Second, 20*time.Millisecond, "the script never started its child: %s", output())
			if tt.signal != 0 {
				require.NoError(t, cmd.Process.Signal(tt.signal))
			}
			select {
			case err = <-done:
				done <- err // for the cleanup
			case <-time.After(15 * time.Second):
				t.Fatalf("the script did not end in 15 s (PROCS_GRACE=%s: did the cleanup wait for groups already gone?): %s", grace, output())
			}
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantCode, code, "exit code; output: %s", output())

			for _, f := range []string{"child.pid", "gc.pid"} {
				pid, err := readPID(filepath.Join(dir, f))
				require.NoError(t, err)
				assert.True(t, gone(pid, 5*time.Second), "%s %d still runs after the script ended; output: %s", f, pid, output())
			}
		})
	}
}

// readPID reads a pid file the script wrote.
func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// gone polls until pid no longer exists (kill(pid, 0) fails with ESRCH), reaping it when it is
// a zombie reparented to this process, and reports whether that happened within wait.
func gone(pid int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
