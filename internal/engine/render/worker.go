package render

// Rendering in a child process: kustomize's working set for a large env (about 1.1 GiB at 10,000
// objects) is held by a process that exits when the render is done, so a long-running parent
// never grows its heap, and keeps its pages, to that peak.
//
// The protocol between parent and child is in worker_protocol.go.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WorkerEnv is the environment variable that makes a process a render worker (ServeWorkerIfChild).
const WorkerEnv = "AUDITOR_RENDER_WORKER"

// Worker runs kustomize in a child process of the given executable, one process per render. The
// executable must call ServeWorkerIfChild before anything else (cmd/auditor's main does, and so
// must the TestMain of tests whose renders go through a Worker).
//
// A Worker runs one child at a time (Parallel raises that): a container's memory limit must hold
// the parent and its children together, and a render of a large env peaks high. Every render
// cache of a process should share one Worker. Renders wait their turn first in, first out, except
// that urgent ones (Cache.Urgent: those the audit loop waits for) go before every other waiting render: a blame walk
// of many commits does not hold up the audit of a new revision.
type Worker struct {
	// Path is the executable (default: the one this process runs, even if replaced since).
	Path string
	// Parallel is how many children may run at once (default 1); others wait their turn.
	Parallel int
	// Timeout bounds one child's run (default DefaultWorkerTimeout): a kustomize stuck on a remote
	// base would otherwise hold the only slot, and every audit behind it, forever.
	Timeout time.Duration

	mu      sync.Mutex
	running int
	waiting [2][]chan struct{} // urgent, then the others: each closed when its turn comes
	peakRSS atomic.Int64
	started atomic.Int64
}

// DefaultWorkerTimeout is how long a render worker may run by default: kustomize builds a
// 10,000-object env in about 10 minutes on two cores.
const DefaultWorkerTimeout = 20 * time.Minute

// NewWorker returns a Worker running this process' own executable.
func NewWorker() *Worker { return &Worker{} }

// PeakRSS is the peak resident set size, in bytes, of the last worker that rendered, as the worker
// measured its own (0 before the first, or off Linux).
func (w *Worker) PeakRSS() int64 { return w.peakRSS.Load() }

// Started counts the worker processes started so far.
func (w *Worker) Started() int64 { return w.started.Load() }

// Queued is how many renders wait for a child to finish.
func (w *Worker) Queued() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(len(w.waiting[0]) + len(w.waiting[1]))
}

// acquire waits for a slot: at once when one is free and nobody waits, else in its queue.
func (w *Worker) acquire(ctx context.Context, urgent bool) error {
	w.mu.Lock()
	if w.running < max(w.Parallel, 1) && len(w.waiting[0])+len(w.waiting[1]) == 0 {
		w.running++
		w.mu.Unlock()
		return nil
	}
	q := 1
	if urgent {
		q = 0
	}
	turn := make(chan struct{})
	w.waiting[q] = append(w.waiting[q], turn)
	w.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	i := slices.Index(w.waiting[q], turn)
	if i >= 0 {
		w.waiting[q] = slices.Delete(w.waiting[q], i, i+1)
	}
	w.mu.Unlock()
	if i < 0 { // its turn came as it gave up: pass the slot on
		w.release()
	}
	return ctx.Err()
}

// release hands the slot to the first urgent waiter, else the first other one, else frees it.
func (w *Worker) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for q := range w.waiting {
		if len(w.waiting[q]) > 0 {
			turn := w.waiting[q][0]
			w.waiting[q] = w.waiting[q][1:]
			close(turn)
			return
		}
	}
	w.running--
}

// render renders env from s in a child process, once a slot is free. Cancelling ctx kills the
// child (and what it started: it leads its own process group).
func (w *Worker) render(ctx context.Context, s Source, env string, urgent bool) (*recordedRender, error) {
	if err := w.acquire(ctx, urgent); err != nil {
		return nil, fmt.Errorf("render %s: waiting for a render worker: %w", env, err)
	}
	defer w.release()
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultWorkerTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("render %s: render worker ran past %s", env, timeout))
	defer cancel()
	path := w.Path
	if path == "" {
		if !workerHook.Load() {
			return nil, fmt.Errorf("render %s: render worker: this program never called render.ServeWorkerIfChild, so a copy of it would not serve renders (call it first thing in main, or TestMain)", env)
		}
		exe, err := workerExecutable()
		if err != nil {
			return nil, fmt.Errorf("render %s: render worker: %w", env, err)
		}
		path = exe
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = []string{"auditor-render-worker"} // what ps shows: /proc/self/exe says nothing
	cmd.Env = append(os.Environ(), WorkerEnv+"=1")
	if lim := childMemoryLimit(); lim > 0 {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+strconv.FormatInt(lim, 10))
	}
	cmd.WaitDelay = 10 * time.Second
	prepareWorker(cmd)
	stderr := &tailBuffer{max: 16 << 10}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("render %s: render worker: %w", env, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("render %s: render worker: %w", env, err)
	}
	if err := startWorker(cmd); err != nil {
		return nil, fmt.Errorf("render %s: start render worker %s: %w", env, path, err)
	}
	w.started.Add(1)
	sent := make(chan error, 1)
	go func() {
		err := writeRequest(stdin, s, env)
		if cerr := stdin.Close(); err == nil {
			err = cerr
		}
		sent <- err
	}()
	out, rerr := readRender(stdout, s.revision, env)
	if rerr != nil {
		_ = cmd.Cancel() // a child whose stream broke is not waited for
	}
	werr := cmd.Wait()
	serr := <-sent
	var reported *workerError
	switch {
	case out != nil:
		w.peakRSS.Store(out.peakRSS)
	case errors.As(rerr, &reported):
		w.peakRSS.Store(reported.peakRSS)
	}
	switch {
	case ctx.Err() != nil:
		if cause := context.Cause(ctx); cause != ctx.Err() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, cause
		}
		return nil, fmt.Errorf("render %s: %w", env, ctx.Err())
	case errors.As(rerr, &reported):
		return nil, rerr
	case rerr != nil || werr != nil:
		cause := errors.Join(rerr, werr, serr)
		return nil, fmt.Errorf("render %s: render worker: %w%s", env, cause, stderr.suffix())
	}
	return out, nil
}

// childMemoryLimit is the soft memory limit a worker runs with when this process has one
// (GOMEMLIMIT, set from a container's memory limit): what this process does not use of it, as the
// container's limit counts both, but at least a quarter of it. 0 when this process has none.
func childMemoryLimit() int64 {
	lim := debug.SetMemoryLimit(-1)
	if lim == math.MaxInt64 {
		return 0
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	used := int64(s[0].Value.Uint64() - s[1].Value.Uint64())
	return max(lim-used, lim/4)
}

// tailBuffer keeps the last max bytes written: a crashing worker's panic or fatal error.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// suffix is the worker's standard error to append to an error message, if it wrote any.
func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(t.b)); s != "" {
		return "\n" + s
	}
	return ""
}
