package render

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Cancelling the context of a running render kills the child: the render returns the context's
// error and the process is gone.
func TestWorkerCancelKillsChild(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pid")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	t.Setenv(hangEnv, fifo)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	w := NewWorker()
	go func() {
		_, err := w.render(ctx, snapshotSource(t, miniRepo, "r1"), "prod")
		done <- err
	}()
	data, err := os.ReadFile(fifo) // blocks until the child is running and says its pid
	require.NoError(t, err)
	pid, err := strconv.Atoi(string(data[:len(data)-1]))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, 0), "the worker runs")

	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	// render returned after Wait reaped the child: its pid names no process any more.
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "worker %d still exists", pid)
}

// The worker's peak RSS is its own: with this process' high-water mark raised well above what a
// small render needs, the figure stays that of the render (the rusage of the exited child would
// start at this process' peak).
func TestWorkerPeakRSSIsTheChildsOwn(t *testing.T) {
	const ballast = 384 << 20
	b := make([]byte, ballast)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1 // touched, so resident
	}
	parent := selfPeakRSS()
	require.Greater(t, parent, int64(ballast), "this process' peak after the ballast")
	runtime.KeepAlive(b)

	c := NewCache("", 2)
	c.Worker = NewWorker()
	_, err := snapshotSource(t, miniRepo, "r1").RenderCachedContext(context.Background(), "prod", c)
	require.NoError(t, err)
	got := c.Worker.PeakRSS()
	assert.Positive(t, got, "the worker reported its peak")
	assert.Less(t, got, int64(ballast/2), "worker peak %d MiB, this process' %d MiB", got>>20, parent>>20)
}

// A worker whose parent is killed (SIGKILL: no deferred cleanup runs) is killed by the kernel,
// not left rendering as an orphan.
func TestWorkerDiesWithItsParent(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pid")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	exe, err := os.Executable()
	require.NoError(t, err)
	parent := exec.Command(exe, "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"=1", hangEnv+"="+fifo)
	require.NoError(t, parent.Start())
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	data, err := os.ReadFile(fifo) // blocks until the worker runs and says its pid
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(child, 0), "the worker runs")

	require.NoError(t, parent.Process.Signal(syscall.SIGKILL))
	_ = parent.Wait()
	assert.Eventually(t, func() bool { return !running(child) }, 10*time.Second, 20*time.Millisecond,
		"worker %d still runs after its parent was killed", child)
}

// running says whether pid is a live process (not gone, not a zombie waiting to be reaped).
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(data), ") ")
	return ok && !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
