// Package reconcile runs one reconcile per key at a time off client-go's rate-limited work
// queue. The work asked of a key (what changed, whether in full) is merged until the key's
// reconcile takes it; a reconcile that fails is retried with its work after a growing pause,
// while new work for the key still runs at once.
package reconcile

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Config says how a Queue merges and reconciles work.
type Config[K comparable, W any] struct {
	// Reconcile does the work asked of key. An error retries it with the same work (merged
	// with what came since) after a growing pause.
	Reconcile func(ctx context.Context, key K, work W) error
	// Merge returns the work of a and b together; a is the older.
	Merge func(a, b W) W
	// Empty says whether work asks nothing (it is then not reconciled); nil: never.
	Empty func(W) bool
	// BaseDelay and MaxDelay bound the pause before a failed key is retried (defaults 500 ms
	// and one minute).
	BaseDelay, MaxDelay time.Duration
	// Idle, when set, runs after a reconcile that left no key queued.
	Idle func()
}

// Queue holds the keys to reconcile and the work asked of each.
type Queue[K comparable, W any] struct {
	cfg Config[K, W]
	q   workqueue.TypedRateLimitingInterface[K]

	mu      sync.Mutex
	pending map[K]W
}

// New returns an empty Queue; Run reconciles what it is given.
func New[K comparable, W any](cfg Config[K, W]) *Queue[K, W] {
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = 500 * time.Millisecond
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = time.Minute
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[K](cfg.BaseDelay, cfg.MaxDelay)
	return &Queue[K, W]{cfg: cfg, pending: map[K]W{},
		q: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[K]{})}
}

// Add asks for work on key now.
func (q *Queue[K, W]) Add(key K, work W) {
	q.Park(key, work)
	q.q.Add(key)
}

// AddAfter asks for work on key in delay: work asked meanwhile joins the same reconcile, so a
// burst of events is one reconcile.
func (q *Queue[K, W]) AddAfter(key K, work W, delay time.Duration) {
	q.Park(key, work)
	q.q.AddAfter(key, delay)
}

// Park records work for key without queuing it: the key's next reconcile, whatever asks for
// it, does this work too.
func (q *Queue[K, W]) Park(key K, work W) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if old, ok := q.pending[key]; ok {
		work = q.cfg.Merge(old, work)
	}
	q.pending[key] = work
}

// ShutDown stops the queue: Run's workers end, and a Queue never run releases its goroutines.
func (q *Queue[K, W]) ShutDown() { q.q.ShutDown() }

// Len is the number of keys waiting for a reconcile (not those waiting out a delay).
func (q *Queue[K, W]) Len() int { return q.q.Len() }

// Retries is the number of times key failed since its last success.
func (q *Queue[K, W]) Retries(key K) int { return q.q.NumRequeues(key) }

// Run reconciles with workers goroutines until ctx ends; a key is reconciled by one at a time.
// It returns once every reconcile has returned.
func (q *Queue[K, W]) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for q.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	q.q.ShutDown()
	wg.Wait()
}

// next reconciles one key; it says false once the queue is shut down.
func (q *Queue[K, W]) next(ctx context.Context) bool {
	key, shutdown := q.q.Get()
	if shutdown {
		return false
	}
	defer q.q.Done(key)
	if ctx.Err() != nil {
		return true // shutting down: what is left stays pending
	}
	q.mu.Lock()
	work, ok := q.pending[key]
	delete(q.pending, key)
	q.mu.Unlock()
	if !ok || q.cfg.Empty != nil && q.cfg.Empty(work) {
		q.q.Forget(key)
		return true
	}
	if err := q.cfg.Reconcile(ctx, key, work); err != nil {
		q.mu.Lock()
		if newer, ok := q.pending[key]; ok { // asked for during the reconcile
			work = q.cfg.Merge(work, newer)
		}
		q.pending[key] = work
		q.mu.Unlock()
		if ctx.Err() == nil {
			q.q.AddRateLimited(key)
		}
		return true
	}
	q.q.Forget(key)
	if q.cfg.Idle != nil && q.q.Len() == 0 {
		q.cfg.Idle()
	}
	return true
}
