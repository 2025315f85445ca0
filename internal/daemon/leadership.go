package daemon

import (
	"context"
	"sync"
	"sync/atomic"
)

// leadership is the part that says whether this replica leads (posts reports, fires alerts),
// and whether the first leader is known yet. It owns its lock, which orders a leadership gained
// against one lost: client-go cancels the leader's context before it reports the loss, so a
// gain that checks its context under the lock never overrides a loss.
type leadership struct {
	changed func(leading bool) // told each change (wakes the dispatchers, sets the metric)

	mu       sync.Mutex
	leading  atomic.Bool
	decided  chan struct{}
	decideMu sync.Once
}

func newLeadership(changed func(bool)) *leadership {
	return &leadership{changed: changed, decided: make(chan struct{})}
}

// Leading says whether this replica leads now.
func (l *leadership) Leading() bool { return l.leading.Load() }

// Decide says the first leader is known (this replica or another).
func (l *leadership) Decide() { l.decideMu.Do(func() { close(l.decided) }) }

// Decided is closed once the first leader is known.
func (l *leadership) Decided() <-chan struct{} { return l.decided }

// Gain makes this replica the leader unless ctx (the leadership's) ended; it says whether it did.
func (l *leadership) Gain(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	l.set(true)
	return true
}

// Lose ends this replica's leadership.
func (l *leadership) Lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set(false)
}

func (l *leadership) set(on bool) {
	l.leading.Store(on)
	if l.changed != nil {
		l.changed(on)
	}
}
