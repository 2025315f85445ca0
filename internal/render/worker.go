package render

// Rendering in a child process: kustomize's working set for a large env (about 1.1 GiB at 10,000
// objects) is held by a process that exits when the render is done, so a long-running parent
// never grows its heap, and keeps its pages, to that peak.
//
// The protocol, one JSON value per line. Parent → child (stdin): a workerRequest, then, for a
// snapshot, one workerFile per file. Child → parent (stdout): a workerHeader (the render's path,
// digest, what it read, or its error), then exactly Count objects, one per line, which the parent
// decodes one at a time, then a workerTrailer.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// workerRequest is what the parent asks: env rendered from the work tree Dir, or from the
// snapshot at Revision whose files follow.
type workerRequest struct {
	Env      string `json:"env"`
	Revision string `json:"revision,omitempty"`
	Dir      string `json:"dir,omitempty"`
	// Variant and Overrides are an Application's patches (Source.WithPatches): the digest, and
	// the kustomization files they rewrote (path from the root → content).
	Variant   string            `json:"variant,omitempty"`
	Overrides map[string][]byte `json:"overrides,omitempty"`
	// Omitted are the snapshot's files too large to read, by size.
	Omitted map[string]int64 `json:"omitted,omitempty"`
	// Helm are the Application's helm options (Source.WithHelm).
	Helm *HelmOptions `json:"helm,omitempty"`
}

// workerFile is one file of a snapshot.
type workerFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// workerHeader is the first line the child writes.
type workerHeader struct {
	Path   string            `json:"path,omitempty"`
	Digest string            `json:"digest,omitempty"`
	Count  int               `json:"count"`
	Probes map[string]string `json:"probes,omitempty"`
	Remote bool              `json:"remote,omitempty"`
	// Error is the render's error message, as an in-process render would have returned it; YAML
	// is its file and line when a file does not parse.
	Error string     `json:"error,omitempty"`
	YAML  *YAMLError `json:"yaml,omitempty"`
	// PeakRSS is the child's own peak resident set size in bytes, with Error (a render's comes
	// in the trailer).
	PeakRSS int64 `json:"peakRSS,omitempty"`
}

// workerTrailer is the last line the child writes after a render's objects.
type workerTrailer struct {
	// PeakRSS is the child's own peak resident set size in bytes, after it wrote the objects.
	PeakRSS int64 `json:"peakRSS"`
}

// workerError is a render error reported by the child: the same message, and the same
// *YAMLError through errors.As, as in process.
type workerError struct {
	msg     string
	yaml    *YAMLError
	peakRSS int64
}

func (e *workerError) Error() string { return e.msg }

func (e *workerError) Unwrap() error {
	if e.yaml == nil {
		return nil
	}
	return e.yaml
}

// recordedRender is a render done by a child, with what it read.
type recordedRender struct {
	// res is the render; a child's comes with its objects as JSON in raw and res.Objects nil
	// until result decodes them: a render the cache keeps is never decoded whole.
	res    *Result
	raw    []json.RawMessage
	probes map[string]string
	remote bool
	// worker says a child rendered; peakRSS is its peak resident set size in bytes.
	worker  bool
	peakRSS int64
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

// writeRequest sends the request and, for a snapshot, its files.
func writeRequest(w io.Writer, s Source, env string) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(workerRequest{Env: env, Revision: s.revision, Dir: s.dir, Variant: s.variant, Overrides: s.overrides, Omitted: s.omitted, Helm: s.helm}); err != nil {
		return err
	}
	if s.dir == "" {
		for name, data := range s.files {
			if err := enc.Encode(workerFile{Name: name, Data: data}); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// readRender reads the child's stream: its header, then its objects one line at a time.
func readRender(r io.Reader, revision, env string) (*recordedRender, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	var h workerHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if h.Error != "" {
		return nil, &workerError{msg: h.Error, yaml: h.YAML, peakRSS: h.PeakRSS}
	}
	res := &Result{Env: env, Path: h.Path, Revision: revision, Digest: h.Digest}
	raw := make([]json.RawMessage, 0, h.Count)
	for i := range h.Count {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("read object %d of %d: %w", i+1, h.Count, err)
		}
		line = bytes.TrimSuffix(line, []byte{'\n'})
		if err := checkObject(line); err != nil {
			return nil, fmt.Errorf("read object %d of %d: %w", i+1, h.Count, err)
		}
		raw = append(raw, line)
	}
	line, err = br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read trailer: %w", err)
	}
	var tr workerTrailer
	if err := json.Unmarshal(line, &tr); err != nil {
		return nil, fmt.Errorf("read trailer: %w", err)
	}
	return &recordedRender{res: res, raw: raw, probes: h.Probes, remote: h.Remote, worker: true, peakRSS: tr.PeakRSS}, nil
}

// checkObject fails unless data is what decoding it as an Unstructured (when a caller needs it
// decoded, maybe long after the cache kept it) accepts: a JSON object with a kind and an
// apiVersion. The rest of it is checked for JSON syntax only, without building it.
func checkObject(data []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if !json.Valid(data) {
		return errors.New("not JSON")
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if head.Kind == "" || head.APIVersion == "" {
		return errors.New("an object without a kind or an apiVersion")
	}
	return nil
}

// result returns the render with its objects decoded.
func (r *recordedRender) result() (*Result, error) {
	if r.res.Objects != nil || r.raw == nil {
		return r.res, nil
	}
	objs := make([]*unstructured.Unstructured, 0, len(r.raw))
	for i, data := range r.raw {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("render %s: object %d of %d: %w", r.res.Env, i+1, len(r.raw), err)
		}
		objs = append(objs, u)
	}
	res := *r.res
	res.Objects = objs
	return &res, nil
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
