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

// Cancelling the context of a running render kills the child and what it started (its process
// group): the render returns the context's error and both processes are gone.
func TestWorkerCancelKillsChild(t *testing.T) {
	fifo := hangFIFO(t)
	t.Setenv(grandchildEnv, "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	w := NewWorker()
	go func() {
		_, err := w.render(ctx, snapshotSource(t, miniRepo, "r1"), "prod", false)
		done <- err
	}()
	pids := readPIDs(t, fifo) // blocks until the child is running and says its pids
	require.Len(t, pids, 2, "the worker and its sleep")
	for _, pid := range pids {
		require.True(t, running(pid), "process %d runs", pid)
	}

	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	// render returned after Wait reaped the child: its pid names no live process any more.
	assert.False(t, running(pids[0]), "worker %d still runs", pids[0])
	assert.Eventually(t, func() bool { return !running(pids[1]) }, 10*time.Second, 20*time.Millisecond,
		"the worker's own child %d still runs", pids[1])
}

// A Worker runs one child at a time: a second render waits until the first one's child is gone,
// so a container's limit holds the daemon and one render.
func TestWorkerRendersOneAtATime(t *testing.T) {
	fifo := hangFIFO(t)
	w := NewWorker()
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done := make(chan error, 2)
	go func() {
		_, err := w.render(ctx1, snapshotSource(t, miniRepo, "r1"), "prod", false)
		done <- err
	}()
	first := readPIDs(t, fifo)[0]
	go func() {
		_, err := w.render(ctx2, snapshotSource(t, miniRepo, "r2"), "prod", false)
		done <- err
	}()
	require.Eventually(t, func() bool { return w.Queued() == 1 }, 10*time.Second, 5*time.Millisecond, "the second render waits its turn")
	assert.EqualValues(t, 1, w.Started(), "one child while the first runs")
	assert.True(t, running(first))
	cancel1()
	second := readPIDs(t, fifo)[0] // the second child says its pid once it runs
	assert.False(t, running(first), "the second worker %d started while the first, %d, still ran", second, first)
	assert.EqualValues(t, 2, w.Started())
	cancel2()
	for range 2 {
		assert.ErrorIs(t, <-done, context.Canceled)
	}
}

// An urgent render (an audit's) waiting for the Worker goes before renders that queued earlier
// (a blame walk's): when the running child ends, the urgent one starts, the other still waits.
func TestWorkerUrgentRenderGoesFirst(t *testing.T) {
	fifo := hangFIFO(t)
	w := NewWorker()
	start := func(rev string, urgent bool) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() {
			_, err := w.render(ctx, snapshotSource(t, miniRepo, rev), "prod", urgent)
			done <- err
		}()
		return cancel, done
	}
	cancelFirst, firstDone := start("r1", false)
	readPIDs(t, fifo) // the first child runs
	cancelWalk, walkDone := start("r2", false)
	require.Eventually(t, func() bool { return w.Queued() == 1 }, 10*time.Second, 5*time.Millisecond)
	cancelAudit, auditDone := start("r3", true)
	require.Eventually(t, func() bool { return w.Queued() == 2 }, 10*time.Second, 5*time.Millisecond)
	cancelFirst()
	require.ErrorIs(t, <-firstDone, context.Canceled)
	readPIDs(t, fifo) // the next child runs: the urgent one, or the walk's
	assert.EqualValues(t, 1, w.Queued())
	cancelWalk()
	err := <-walkDone
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "waiting for a render worker", "the earlier, non-urgent render was still queued")
	cancelAudit()
	require.ErrorIs(t, <-auditDone, context.Canceled)
	assert.EqualValues(t, 2, w.Started())
	assert.EqualValues(t, 0, w.Queued())
}

// hangFIFO makes the workers this test starts hang after writing their pid to the returned FIFO.
func hangFIFO(t *testing.T) string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "pid")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	t.Setenv(hangEnv, fifo)
	return fifo
}

// readPIDs reads one line of pids from the FIFO, blocking until a worker writes it.
func readPIDs(t *testing.T, fifo string) []int {
	t.Helper()
	data, err := os.ReadFile(fifo)
	require.NoError(t, err)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
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
	_, err := Engine{Cache: c}.Render(context.Background(), snapshotSource(t, miniRepo, "r1"), Target{Name: "prod"})
	require.NoError(t, err)
	got := c.Worker.PeakRSS()
	assert.Positive(t, got, "the worker reported its peak")
	assert.Less(t, got, int64(ballast/2), "worker peak %d MiB, this process' %d MiB", got>>20, parent>>20)
}

// A worker whose parent is killed (SIGKILL: no deferred cleanup runs) is killed by the kernel,
// not left rendering as an orphan.
func TestWorkerDiesWithItsParent(t *testing.T) {
	fifo := hangFIFO(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	parent := exec.Command(exe, "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"=1")
	require.NoError(t, parent.Start())
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	child := readPIDs(t, fifo)[0] // blocks until the worker runs and says its pid
	require.True(t, running(child), "the worker runs")

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

// A worker that runs past the Worker's Timeout is killed and the render fails saying so: a
// stuck kustomize does not hold the only slot forever.
func TestWorkerTimeout(t *testing.T) {
	fifo := hangFIFO(t)
	w := &Worker{Timeout: time.Second}
	done := make(chan error, 1)
	go func() {
		_, err := w.render(context.Background(), snapshotSource(t, miniRepo, "r1"), "prod", false)
		done <- err
	}()
	pid := readPIDs(t, fifo)[0]
	err := <-done
	require.Error(t, err)
	assert.Contains(t, err.Error(), "render prod: render worker ran past 1s")
	assert.False(t, running(pid), "worker %d still runs", pid)
}
