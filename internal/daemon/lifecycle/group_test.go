package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/lifecycle"
)

// waiter is a part that says when it started and records that it stopped.
type waiter struct {
	started chan struct{}
	mu      sync.Mutex
	stopped bool
}

func newWaiter() *waiter { return &waiter{started: make(chan struct{})} }

func (w *waiter) run(ctx context.Context) error {
	close(w.started)
	<-ctx.Done()
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	return ctx.Err() // a part stopped by its context may say so: that is no failure
}

func (w *waiter) wasStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

func runAsync(ctx context.Context, g *lifecycle.Group) <-chan error {
	out := make(chan error, 1)
	go func() { out <- g.Run(ctx) }()
	return out
}

func wait(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Run did not return within 10 s")
		return nil
	}
}

func TestEveryPartStartsAndStopsWithTheContext(t *testing.T) {
	g := lifecycle.NewGroup(nil)
	a, b := newWaiter(), newWaiter()
	g.Add("a", a.run)
	g.Add("b", b.run)
	assert.Equal(t, []string{"a", "b"}, g.Names())
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, g)
	<-a.started
	<-b.started
	cancel()
	require.NoError(t, wait(t, done))
	assert.True(t, a.wasStopped())
	assert.True(t, b.wasStopped())
}

func TestAFailingPartStopsTheOthersAndIsNamed(t *testing.T) {
	g := lifecycle.NewGroup(nil)
	a := newWaiter()
	g.Add("a", a.run)
	boom := errors.New("port in use")
	g.Add("http", func(ctx context.Context) error {
		<-a.started
		return boom
	})
	err := wait(t, runAsync(context.Background(), g))
	require.ErrorIs(t, err, boom)
	assert.EqualError(t, err, "http: port in use")
	assert.True(t, a.wasStopped(), "Run returned before the other part stopped")
}

func TestAPartDoneEarlyLeavesTheOthersRunning(t *testing.T) {
	g := lifecycle.NewGroup(nil)
	a := newWaiter()
	finished := make(chan struct{})
	g.Add("once", func(context.Context) error { close(finished); return nil })
	g.Add("a", a.run)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, g)
	<-finished
	<-a.started
	select {
	case err := <-done:
		require.FailNow(t, "Run returned when one part finished", "err: %v", err)
	default:
	}
	assert.False(t, a.wasStopped())
	cancel()
	require.NoError(t, wait(t, done))
}

func TestStopStepsRunAfterEveryPartInReverseOrder(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "context ended", true: "a part failed"}[fail], func(t *testing.T) {
			g := lifecycle.NewGroup(nil)
			a := newWaiter()
			var mu sync.Mutex
			var steps []string
			step := func(name string) func() {
				return func() {
					mu.Lock()
					defer mu.Unlock()
					// A step runs only once the parts have returned: what it closes is theirs.
					steps = append(steps, name+map[bool]string{true: " after a stopped", false: " before a stopped"}[a.wasStopped()])
				}
			}
			g.Add("a", a.run)
			g.OnStop("flush", step("flush"))
			g.OnStop("close", step("close"))
			if fail {
				g.Add("b", func(context.Context) error { <-a.started; return errors.New("boom") })
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := runAsync(ctx, g)
			<-a.started
			if !fail {
				cancel()
			}
			err := wait(t, done)
			if fail {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"close after a stopped", "flush after a stopped"}, steps)
		})
	}
}
