package reconcile_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/reconcile"
)

// call is one reconcile as the test saw it.
type call struct {
	key  string
	work []string
}

// recorder reconciles sets of strings and records each call; fail says which calls fail.
type recorder struct {
	mu    sync.Mutex
	calls []call
	got   chan call
	fail  func(n int, key string) bool
	block chan struct{} // when set, each reconcile waits for it
}

func newRecorder() *recorder { return &recorder{got: make(chan call, 100)} }

func (r *recorder) queue(t *testing.T) *reconcile.Queue[string, map[string]bool] {
	t.Helper()
	return reconcile.New(reconcile.Config[string, map[string]bool]{
		BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond,
		Merge: func(a, b map[string]bool) map[string]bool {
			out := maps.Clone(a)
			maps.Copy(out, b)
			return out
		},
		Empty: func(w map[string]bool) bool { return len(w) == 0 },
		Reconcile: func(ctx context.Context, key string, work map[string]bool) error {
			if r.block != nil {
				select {
				case <-r.block:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			c := call{key: key, work: slices.Sorted(maps.Keys(work))}
			r.mu.Lock()
			n := len(r.calls)
			r.calls = append(r.calls, c)
			r.mu.Unlock()
			r.got <- c
			if r.fail != nil && r.fail(n, key) {
				return errors.New("failed")
			}
			return nil
		},
	})
}

func (r *recorder) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-r.got:
		return c
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no reconcile within 10 s")
		return call{}
	}
}

func set(items ...string) map[string]bool {
	out := map[string]bool{}
	for _, it := range items {
		out[it] = true
	}
	return out
}

func run(t *testing.T, q *reconcile.Queue[string, map[string]bool], workers int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx, workers) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "Run did not return within 10 s of its context's end")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestWorkAskedBeforeAReconcileJoinsIt(t *testing.T) {
	r := newRecorder()
	q := r.queue(t)
	q.Add("dev", set("a"))
	q.Add("dev", set("b"))
	q.Add("prod", set("c"))
	q.Add("dev", set("a", "d"))
	run(t, q, 1)
	got := map[string][]string{}
	for range 2 {
		c := r.next(t)
		got[c.key] = c.work
	}
	assert.Equal(t, map[string][]string{"dev": {"a", "b", "d"}, "prod": {"c"}}, got)
	q.Add("prod", set("e")) // a positive signal that nothing else was queued before it
	assert.Equal(t, call{key: "prod", work: []string{"e"}}, r.next(t))
}

func TestWorkAskedDuringAReconcileRunsAfterItNeverBeside(t *testing.T) {
	r := newRecorder()
	r.block = make(chan struct{})
	var running, most atomic.Int32
	var mu sync.Mutex
	var works [][]string
	q := reconcile.New(reconcile.Config[string, map[string]bool]{
		Merge: func(a, b map[string]bool) map[string]bool { out := maps.Clone(a); maps.Copy(out, b); return out },
		Reconcile: func(ctx context.Context, key string, work map[string]bool) error {
			mu.Lock()
			works = append(works, slices.Sorted(maps.Keys(work)))
			mu.Unlock()
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			r.block <- struct{}{} // tells the test it started, and waits for it to go on
			<-r.block
			return nil
		},
	})
	run(t, q, 4)
	q.Add("dev", set("a"))
	<-r.block // the first reconcile runs
	q.Add("dev", set("b"))
	q.Add("dev", set("c"))
	r.block <- struct{}{} // ends the first
	<-r.block             // the second starts only now
	r.block <- struct{}{}
	assert.Equal(t, int32(1), most.Load(), "two reconciles of one key ran at once")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, [][]string{{"a"}, {"b", "c"}}, works)
}

func TestAFailedReconcileIsRetriedWithItsWorkAndWhatCameSince(t *testing.T) {
	r := newRecorder()
	r.fail = func(n int, _ string) bool { return n < 2 }
	q := r.queue(t)
	run(t, q, 1)
	q.Add("dev", set("a"))
	first := r.next(t)
	assert.Equal(t, []string{"a"}, first.work)
	second := r.next(t) // after the pause
	assert.Equal(t, []string{"a"}, second.work)
	q.Add("dev", set("b"))
	third := r.next(t)
	assert.Equal(t, []string{"a", "b"}, third.work, "the failed work is not lost")
	q.Add("dev", set("c")) // reconciled once the third has returned, and been forgotten
	assert.Equal(t, []string{"c"}, r.next(t).work)
	assert.Zero(t, q.Retries("dev"), "a success forgets the failures")
}

func TestParkedWorkWaitsForTheNextAsk(t *testing.T) {
	r := newRecorder()
	q := r.queue(t)
	run(t, q, 1)
	q.Park("dev", set("full"))
	q.Add("prod", set("x")) // reconciled; dev is not queued
	assert.Equal(t, call{key: "prod", work: []string{"x"}}, r.next(t))
	q.Add("dev", set("a"))
	assert.Equal(t, call{key: "dev", work: []string{"a", "full"}}, r.next(t))
}

func TestABurstAskedWithADelayIsOneReconcile(t *testing.T) {
	r := newRecorder()
	q := r.queue(t)
	run(t, q, 1)
	for _, it := range []string{"a", "b", "c"} {
		q.AddAfter("dev", set(it), 200*time.Millisecond)
	}
	assert.Equal(t, call{key: "dev", work: []string{"a", "b", "c"}}, r.next(t))
}

func TestEmptyWorkIsNotReconciled(t *testing.T) {
	r := newRecorder()
	q := r.queue(t)
	run(t, q, 1)
	q.Add("dev", set())
	q.Add("prod", set("x"))
	assert.Equal(t, call{key: "prod", work: []string{"x"}}, r.next(t))
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Len(t, r.calls, 1, "dev, asked first, had nothing to do")
}

func TestRunEndsWithItsContextAndCancelsTheReconcileInFlight(t *testing.T) {
	started := make(chan struct{})
	var cancelled atomic.Bool
	q := reconcile.New(reconcile.Config[string, map[string]bool]{
		Merge: func(a, b map[string]bool) map[string]bool { return a },
		Reconcile: func(ctx context.Context, key string, work map[string]bool) error {
			close(started)
			<-ctx.Done()
			cancelled.Store(true)
			return ctx.Err()
		},
	})
	stop := run(t, q, 2)
	q.Add("dev", set("a"))
	<-started
	stop()
	assert.True(t, cancelled.Load())
}
