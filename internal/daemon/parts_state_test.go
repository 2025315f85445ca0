package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestStateFileSavesWholeStatesOneAtATime: saves from many goroutines, each of the state as it
// is when the save begins (the tracker's, which only moves on), leave the newest state in the
// file: an older state never lands after a newer one. A state that cannot be made leaves the last
// file as it was.
func TestStateFileSavesWholeStatesOneAtATime(t *testing.T) {
	f := &stateFile{path: filepath.Join(t.TempDir(), "drift-state.json")}
	var mu sync.Mutex
	version := 0
	state := func() ([]byte, error) { // the tracker's state: each read sees every change before it
		mu.Lock()
		version++
		v := version
		mu.Unlock()
		runtime.Gosched() // between reading the state and writing it, another save may run
		return fmt.Appendf(nil, `{"version":%d}`, v), nil
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { assert.NoError(t, f.save(state)) })
	}
	wg.Wait()
	data, err := os.ReadFile(f.path)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":50}`, string(data), "an older state landed after a newer one")

	err = f.save(func() ([]byte, error) { return nil, errors.New("tracker closed") })
	require.ErrorContains(t, err, "drift-state.json: tracker closed")
	after, err := os.ReadFile(f.path)
	require.NoError(t, err)
	assert.Equal(t, data, after)
}

// TestInformerHooksSubscribeOncePerInformer: the audits' informers (a real cache against the
// test cluster) are subscribed to once however many audits ask, and again once a stopped
// cache's informers were forgotten and a new cache made.
func TestInformerHooksSubscribeOncePerInformer(t *testing.T) {
	testcluster.Need(t)
	hooked := map[cache.SharedIndexInformer]int{}
	h := newInformerHooks(func(_ schema.GroupVersionKind, inf cache.SharedIndexInformer, _ bool) { hooked[inf]++ })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := live.New(ctx, cluster.Config)
	require.NoError(t, err)
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	require.NoError(t, c.Watch(ctx, []schema.GroupVersionKind{cm}, nil))

	h.add(c)
	h.add(c)
	infs := c.Informers(cm)
	require.NotEmpty(t, infs)
	for _, inf := range infs {
		assert.Equal(t, 1, hooked[inf], "an informer subscribed to more than once")
	}
	h.forget(c)
	h.add(c)
	for _, inf := range infs {
		assert.Equal(t, 2, hooked[inf], "a forgotten informer was not subscribed to again")
	}
}

// TestInformersHookedFromTheirStartSkipOnlyTheirInitialList: an informer hooked before it runs
// (as the daemon's caches do) touches nothing for the objects its first list brings, which the
// audit that started it reads, and touches each object made after. An informer hooked after it
// synced (the daemon's fallback) has its store replayed: each object in it is touched, since it
// may have changed before the handler came. Real informers against the test cluster.
func TestInformersHookedFromTheirStartSkipOnlyTheirInitialList(t *testing.T) {
	testcluster.Need(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := cluster.Namespace(t)
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	mkCM := func(name string) {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	touched := map[string]bool{} // "<which cache>/<name>" of the test's namespace
	hooks := func(which string) *informerHooks {
		touch := func(_ schema.GroupVersionKind, obj any) {
			if o, ok := obj.(metav1.Object); ok && o.GetNamespace() == ns {
				mu.Lock()
				touched[which+"/"+o.GetName()] = true
				mu.Unlock()
			}
		}
		return newInformerHooks(func(gvk schema.GroupVersionKind, inf cache.SharedIndexInformer, fromStart bool) {
			_, _ = inf.AddEventHandler(changes(gvk, fromStart, touch, func(drift.Ref) {}))
		})
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(maps.Keys(touched))
	}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	mkCM("before")

	early, late := hooks("early"), hooks("late")
	c1, err := live.New(ctx, cluster.Config)
	require.NoError(t, err)
	c1.SetInformerHook(early.starting)
	require.NoError(t, c1.Watch(ctx, []schema.GroupVersionKind{cm}, nil))
	early.add(c1) // as after each audit: nothing hooked twice
	c2, err := live.New(ctx, cluster.Config)
	require.NoError(t, err)
	require.NoError(t, c2.Watch(ctx, []schema.GroupVersionKind{cm}, nil))
	late.add(c2)

	mkCM("after")
	want := []string{"early/after", "late/after", "late/before"}
	require.Eventually(t, func() bool { return slices.Equal(seen(), want) }, 30*time.Second, 20*time.Millisecond, "touched: %v", seen())
}

// TestShardingTakesAndGivesShards: a shard taken after its holding ended is not held; a shard
// given up is dropped before anything else sees the sharding again; Argo CD's cluster and
// destinations no shard is belong to in-cluster.
func TestShardingTakesAndGivesShards(t *testing.T) {
	s := &sharding{owned: map[string]bool{}, names: []string{audit.InCluster, "edge"}}
	s.take(context.Background(), audit.InCluster)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	s.take(ended, "edge")
	assert.Equal(t, []string{audit.InCluster}, s.held())
	assert.True(t, s.holds(""), "Argo CD's own cluster")
	assert.True(t, s.holds("https://10.0.0.9:6443"), "a destination no shard is")
	assert.False(t, s.holds("edge"))

	s.take(context.Background(), "edge")
	rep := &drift.Report{Env: "prod", Applications: []drift.Application{{Name: "vllm", Cluster: "edge"}},
		Objects: []drift.Object{{Kind: "Deployment", Name: "vllm", Cluster: "edge"}, {Kind: "Deployment", Name: "api"}}}
	var spoken []drift.Object
	s.speak(rep, func(part *drift.Report, covered func(string) bool) {
		spoken = part.Objects
		assert.True(t, covered("edge"))
		assert.False(t, covered(""), "in-cluster has no Application in this report")
	})
	assert.Equal(t, []drift.Object{{Kind: "Deployment", Name: "vllm", Cluster: "edge"}}, spoken)

	dropped := false
	s.give("edge", func() {
		dropped = true
		assert.False(t, s.owned["edge"], "dropped before the shard was given up")
	})
	assert.True(t, dropped)
	assert.Equal(t, []string{audit.InCluster}, s.held())
}

// TestShardingHandsOverWhileReportsAreSpoken: a shard is given up and taken again while reports
// are spoken for and the answers used after: nothing of a hand-over runs inside a report's
// speaking (run with -race: the answer outlives the lock).
func TestShardingHandsOverWhileReportsAreSpoken(t *testing.T) {
	s := &sharding{owned: map[string]bool{}, names: []string{audit.InCluster, "edge"}}
	s.take(context.Background(), "edge")
	rep := &drift.Report{Env: "prod", Applications: []drift.Application{{Name: "vllm", Cluster: "edge"}},
		Objects: []drift.Object{{Kind: "Deployment", Name: "vllm", Cluster: "edge"}}}
	var speaking atomic.Bool
	var handovers atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.give("edge", func() { assert.False(t, speaking.Load(), "a shard handed over while a report was spoken for") })
			handovers.Add(1)
			s.take(context.Background(), "edge")
			_ = s.holds("edge")
		}
	})
	for spoken := 0; spoken < 200 || handovers.Load() < 200; spoken++ {
		var covered func(string) bool
		s.speak(rep, func(_ *drift.Report, c func(string) bool) {
			speaking.Store(true)
			covered = c
			speaking.Store(false)
		})
		_ = covered("edge") // after the lock, as episodes use it
	}
	close(stop)
	wg.Wait()
	assert.GreaterOrEqual(t, handovers.Load(), int64(200))
}
