package daemon

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/reconcile"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

func TestWorkMergesWhatEachAskAsks(t *testing.T) {
	a, b := drift.Ref{Kind: "Deployment", Namespace: "llm", Name: "vllm"}, drift.Ref{Kind: "Service", Namespace: "llm", Name: "api"}
	tests := []struct {
		name     string
		old, new work
		want     work
	}{
		{"refs join", work{refs: map[drift.Ref]bool{a: true}}, work{refs: map[drift.Ref]bool{b: true}},
			work{refs: map[drift.Ref]bool{a: true, b: true}}},
		{"a full audit stays full", work{full: true}, work{refs: map[drift.Ref]bool{b: true}},
			work{full: true, refs: map[drift.Ref]bool{b: true}}},
		{"an announcement and a fetch are kept", work{announce: true}, work{fetched: true}, work{announce: true, fetched: true}},
		{"nothing into nothing", work{}, work{}, work{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mergeWork(tt.old, tt.new)
			assert.Empty(t, cmp.Diff(tt.want, got, cmp.AllowUnexported(work{})))
			assert.Equal(t, tt.want.empty(), got.empty())
		})
	}
	assert.True(t, work{}.empty())
	assert.False(t, work{fetched: true}.empty())
}

func TestAskGivesEachEnvItsOwnWork(t *testing.T) {
	d := newDaemon(&Config{Envs: []string{"dev", "prod"}, Debounce: Duration{Duration: 100 * time.Millisecond}}, nil, nil)
	got := make(chan string, 10)
	seen := map[string]work{}
	var mu sync.Mutex
	d.queue = reconcile.New(reconcile.Config[string, work]{Merge: mergeWork, Empty: work.empty,
		Reconcile: func(_ context.Context, env string, w work) error {
			mu.Lock()
			seen[env] = w
			mu.Unlock()
			got <- env
			return nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.queue.Run(ctx, 1)
	vllm, api := drift.Ref{Kind: "Deployment", Namespace: "llm", Name: "vllm"}, drift.Ref{Kind: "Service", Namespace: "llm", Name: "api"}
	d.touchRef(vllm)
	d.queue.Park("dev", work{refs: map[drift.Ref]bool{api: true}}) // merged into dev's work alone
	d.touchRef(vllm)                                               // the same burst: one audit per env
	for range 2 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no audit within 10 s")
		}
	}
	mu.Lock()
	assert.Equal(t, map[drift.Ref]bool{vllm: true, api: true}, seen["dev"].refs)
	assert.Equal(t, map[drift.Ref]bool{vllm: true}, seen["prod"].refs)
	mu.Unlock()
	// A later ask is audited with its own work alone: the burst above was one audit per env.
	route := drift.Ref{Kind: "HTTPRoute", Namespace: "llm", Name: "api"}
	d.ask(work{refs: map[drift.Ref]bool{route: true}}, false)
	for range 2 {
		select {
		case env := <-got:
			mu.Lock()
			assert.Equal(t, map[drift.Ref]bool{route: true}, seen[env].refs, env)
			mu.Unlock()
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no audit within 10 s")
		}
	}
}

func TestEnvStatesKeepTheLastReportThroughAFailure(t *testing.T) {
	s := newEnvStates()
	_, ok := s.current("dev")
	assert.False(t, ok)
	_, err := s.reportOrError("dev")
	require.EqualError(t, err, "no audit yet")
	assert.False(t, s.settled([]string{"dev"}), "no audit yet")

	rep := &drift.Report{Env: "dev", Revision: "abc"}
	s.record("dev", rep, nil)
	got, ok := s.current("dev")
	require.True(t, ok)
	assert.Same(t, rep, got)

	renderErr := errors.New("kustomize: accumulating resources: missing file")
	s.record("dev", nil, renderErr)
	_, ok = s.current("dev")
	assert.False(t, ok, "the last audit failed: nothing to announce")
	got, err = s.reportOrError("dev")
	require.NoError(t, err, "the last report stands")
	assert.Same(t, rep, got)
	rev, err := s.revision("dev")
	assert.Equal(t, "abc", rev)
	assert.Equal(t, renderErr, err)
	assert.True(t, s.settled([]string{"dev"}))

	s.record("prod", nil, renderErr)
	assert.True(t, s.settled([]string{"dev", "prod"}), "an env's own error settles it: the daemon is ready")
	s.record("staging", nil, &net503{})
	assert.False(t, s.settled([]string{"dev", "staging"}), "the API's error is the daemon's: not ready")

	assert.Greater(t, s.sinceFull("dev"), 24*time.Hour)
	s.startFull("dev", time.Now())
	assert.Less(t, s.sinceFull("dev"), time.Minute)
}

// net503 is a network error, as the cluster's API answers when it cannot be reached.
type net503 struct{}

func (*net503) Error() string   { return "dial tcp 10.0.0.1:6443: connect: connection refused" }
func (*net503) Timeout() bool   { return false }
func (*net503) Temporary() bool { return false }

func TestLedgerWriterWritesEachRevisionOnceAndOneSyncAtATime(t *testing.T) {
	w := newLedgerWriter()
	var running, most, calls atomic.Int32
	release := make(chan struct{})
	syncer := func(fail bool) func() error {
		return func() error {
			calls.Add(1)
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			if fail {
				return errors.New("push rejected")
			}
			return nil
		}
	}
	w.start("dev", "r1", syncer(false))
	w.start("prod", "r1", syncer(false))
	w.start("dev", "r1", syncer(false)) // busy: not started again
	close(release)
	w.wait()
	assert.Equal(t, int32(2), calls.Load())
	assert.Equal(t, int32(1), most.Load(), "two syncs shared the clone at once")

	w.start("dev", "r1", syncer(false)) // written: nothing to do
	w.wait()
	assert.Equal(t, int32(2), calls.Load())

	w.start("dev", "r2", syncer(true)) // fails: retried at the next start
	w.wait()
	w.start("dev", "r2", syncer(false))
	w.wait()
	assert.Equal(t, int32(4), calls.Load())
}
