package outbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

// TestSharedRecordKeepsOpenDriftOnly: what a replica taking over needs is the drift announced and
// not yet resolved; resolved entries are left out, and an outbox loading the shared record takes
// it as the truth over what it remembered.
func TestSharedRecordKeepsOpenDriftOnly(t *testing.T) {
	dir := t.TempDir()
	ob, err := OpenOutbox(dir, 0)
	require.NoError(t, err)
	store := &memStore{}
	ob.ShareRecord(store)
	drift1 := message.Message{ID: "1", Kind: message.KindDrift, Keys: []string{"prod|v1/ConfigMap/ns/a||kubectl-create|r1"}}
	drift2 := message.Message{ID: "2", Kind: message.KindDrift, Keys: []string{"prod|v1/ConfigMap/ns/b||kubectl-create|r1"}}
	resolved2 := message.Message{ID: "3", Kind: message.KindResolved, Keys: []string{"prod|v1/ConfigMap/ns/b||kubectl-create|r2"}}
	for _, m := range []message.Message{drift1, drift2, resolved2} {
		require.NoError(t, ob.MarkDelivered(m))
	}
	other, err := OpenOutbox(t.TempDir(), 0)
	require.NoError(t, err)
	require.NoError(t, other.MarkDelivered(message.Message{ID: "x", Kind: message.KindDrift, Keys: []string{"prod|v1/ConfigMap/ns/stale||kubectl-create|r0"}}))
	other.ShareRecord(store)
	require.NoError(t, other.LoadShared(context.Background()))
	assert.Equal(t, []string{"prod|v1/ConfigMap/ns/a||kubectl-create|"}, other.AnnouncedDrift())
	assert.True(t, other.Announced(drift1), "the same drift under another revision is announced")
	assert.False(t, other.Announced(drift2), "drift b was resolved: announcing it again is news")

	n, err := ob.DropPending(func(message.Message) bool { return true })
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, ob.Enqueue(drift2))
	require.NoError(t, ob.Enqueue(message.Message{ID: "al", Kind: message.KindDigest, Keys: []string{"alert/x"}}))
	n, err = ob.DropPending(func(m message.Message) bool { return m.Keys[0] != "alert/x" })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, ob.Depth())
}

type memStore struct{ data []byte }

func (m *memStore) Load(context.Context) ([]byte, error) { return m.data, nil }

func (m *memStore) Save(_ context.Context, d []byte) error { m.data = d; return nil }
