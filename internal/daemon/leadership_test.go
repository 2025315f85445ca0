package daemon

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeadershipGainedAndLost(t *testing.T) {
	var mu sync.Mutex
	var told []bool
	l := newLeadership(func(on bool) { mu.Lock(); told = append(told, on); mu.Unlock() })
	assert.False(t, l.Leading())

	require.True(t, l.Gain(context.Background()))
	assert.True(t, l.Leading())
	l.Lose()
	assert.False(t, l.Leading())

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, l.Gain(ended), "a leadership whose context ended was gained")
	assert.False(t, l.Leading())
	assert.Equal(t, []bool{true, false}, told, "each change is told once, and only changes made")
}

// TestLeadershipLossIsNeverOverridden: client-go cancels the leader's context, then reports the
// loss. A gain racing with both (the record read from the Lease just finished) must not leave
// the replica leading.
func TestLeadershipLossIsNeverOverridden(t *testing.T) {
	for range 200 {
		l := newLeadership(nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); l.Gain(ctx) }()
		go func() { defer wg.Done(); cancel(); l.Lose() }()
		wg.Wait()
		require.False(t, l.Leading(), "leading after the leadership was lost")
	}
}

func TestLeadershipIsDecidedOnce(t *testing.T) {
	l := newLeadership(nil)
	select {
	case <-l.Decided():
		require.FailNow(t, "decided before any leader was known")
	default:
	}
	l.Decide()
	l.Decide() // every new leader says so again
	select {
	case <-l.Decided():
	default:
		require.FailNow(t, "not decided after Decide")
	}
}
