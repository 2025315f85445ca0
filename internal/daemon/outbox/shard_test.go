package outbox

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
)

// clusterOf is the shard of a test key: its second part, "hub" or "edge".
func clusterOf(key string) string { return strings.Split(key, "|")[1] }

// TestRecordsPerShard: each delivery is saved in the record of its keys' shard only, and loading
// one shard's record replaces that shard's entries and keeps the others'.
func TestRecordsPerShard(t *testing.T) {
	stores := map[string]*memStore{"hub": {}, "edge": {}}
	share := func(ob *Outbox) {
		ob.ShareRecords(clusterOf, func(s string) RecordStore { return stores[s] })
	}
	ob, err := OpenOutbox(t.TempDir(), 0)
	require.NoError(t, err)
	share(ob)
	hub := message.Message{ID: "1", Kind: message.KindDrift, Keys: []string{"prod|hub|a|m|r1"}}
	edge := message.Message{ID: "2", Kind: message.KindDrift, Keys: []string{"prod|edge|b|m|r1"}}
	require.NoError(t, ob.MarkDelivered(hub))
	require.NoError(t, ob.MarkDelivered(edge))
	assert.Contains(t, string(stores["hub"].data), "|hub|a|")
	assert.NotContains(t, string(stores["hub"].data), "|edge|")
	assert.Contains(t, string(stores["edge"].data), "|edge|b|")

	// Another replica, which announced other drift on the hub, takes the edge over.
	next, err := OpenOutbox(t.TempDir(), 0)
	require.NoError(t, err)
	require.NoError(t, next.MarkDelivered(message.Message{ID: "x", Kind: message.KindDrift, Keys: []string{"prod|hub|own|m|r1"}}))
	require.NoError(t, next.MarkDelivered(message.Message{ID: "y", Kind: message.KindDrift, Keys: []string{"prod|edge|stale|m|r0"}}))
	share(next)
	require.NoError(t, next.LoadShard(context.Background(), "edge"))
	assert.Equal(t, []string{"prod|edge|b|m|", "prod|hub|own|m|"}, next.AnnouncedDrift(),
		"the edge's entries are its record's; the hub's stay this replica's own")
}

type countSink struct{ sent atomic.Int32 }

func (s *countSink) Name() string { return "count" }

func (s *countSink) Send(context.Context, message.Message) error { s.sent.Add(1); return nil }

var _ sinks.Sink = (*countSink)(nil)

// TestClaimDropsMessagesOfShardsHandedOver: a message the replica no longer posts (its shard is
// another's) leaves the outbox unsent; a claimed one is sent, and done is called after its
// delivery is recorded.
func TestClaimDropsMessagesOfShardsHandedOver(t *testing.T) {
	ob, err := OpenOutbox(t.TempDir(), 0)
	require.NoError(t, err)
	require.NoError(t, ob.Enqueue(message.Message{ID: "edge", Kind: message.KindDrift, Keys: []string{"prod|edge|b|m|r1"}}))
	require.NoError(t, ob.Enqueue(message.Message{ID: "hub", Kind: message.KindDrift, Keys: []string{"prod|hub|a|m|r1"}}))
	var done atomic.Int32
	sink := &countSink{}
	d := NewDispatcher(sink, ob, DispatcherConfig{Rate: -1, Claim: func(m message.Message) (Verdict, func()) {
		if clusterOf(m.Keys[0]) != "hub" {
			return Drop, nil
		}
		return Post, func() {
			assert.True(t, ob.Announced(m), "done comes after the delivery is recorded")
			done.Add(1)
		}
	}})
	defer d.Close()
	require.Eventually(t, func() bool { return ob.Depth() == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, int32(1), sink.sent.Load(), "only the hub's message is sent")
	assert.Equal(t, int32(1), done.Load())
	assert.Equal(t, uint64(1), d.Suppressed())
}
