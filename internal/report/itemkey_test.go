package report

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/drift"
)

// TestItemFromKeyRoundTrip rebuilds items from their dedupe keys, as a new leader does from the
// delivery record: object, field path and writer come back; values do not.
func TestItemFromKeyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  drift.Object
		path string
		mgr  string
		rev  string
	}{
		{"namespaced field", drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm-api", Name: "rag-api", Status: drift.Modified}, `.metadata.annotations["a|b"]`, "kubectl-edit", "abc"},
		{"core group", drift.Object{APIVersion: "v1", Kind: "Service", Namespace: "llm-api", Name: "rag-api", Status: drift.Modified}, ".spec.ports[port=53,protocol=UDP].targetPort", "", "abc"},
		{"cluster-scoped missing", drift.Object{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass", Name: "gpu"}, "", "", ""},
		{"extra", drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm-api", Name: "hotfix", Creator: &drift.Writer{Manager: "kubectl-create"}}, "", "kubectl-create", "r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := ItemKey("prod", tc.obj, tc.path, tc.mgr, tc.rev)
			it, ok := ItemFromKey(key)
			require.True(t, ok)
			want := tc.obj
			if tc.path != "" {
				want.Fields = []drift.Field{{Path: tc.path, Writer: drift.Writer{Manager: tc.mgr}}}
			}
			if diff := cmp.Diff(Item{Key: key, Env: "prod", Revision: tc.rev, Object: want}, it); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			require.Equal(t, ItemKey("prod", it.Object, tc.path, tc.mgr, tc.rev), key, "the rebuilt item has the same key")
		})
	}
	_, ok := ItemFromKey("prod|v1/ConfigMap")
	require.False(t, ok, "a truncated key")
}

// TestSharedRecordKeepsOpenDriftOnly: what a replica taking over needs is the drift announced and
// not yet resolved; resolved entries are left out, and an outbox loading the shared record takes
// it as the truth over what it remembered.
func TestSharedRecordKeepsOpenDriftOnly(t *testing.T) {
	dir := t.TempDir()
	ob, err := OpenOutbox(dir, 0)
	require.NoError(t, err)
	store := &memStore{}
	ob.ShareRecord(store)
	drift1 := Message{ID: "1", Kind: KindDrift, Keys: []string{"prod|v1/ConfigMap/ns/a||kubectl-create|r1"}}
	drift2 := Message{ID: "2", Kind: KindDrift, Keys: []string{"prod|v1/ConfigMap/ns/b||kubectl-create|r1"}}
	resolved2 := Message{ID: "3", Kind: KindResolved, Keys: []string{"prod|v1/ConfigMap/ns/b||kubectl-create|r2"}}
	for _, m := range []Message{drift1, drift2, resolved2} {
		require.NoError(t, ob.MarkDelivered(m))
	}
	other, err := OpenOutbox(t.TempDir(), 0)
	require.NoError(t, err)
	require.NoError(t, other.MarkDelivered(Message{ID: "x", Kind: KindDrift, Keys: []string{"prod|v1/ConfigMap/ns/stale||kubectl-create|r0"}}))
	other.ShareRecord(store)
	require.NoError(t, other.LoadShared(context.Background()))
	assert.Equal(t, []string{"prod|v1/ConfigMap/ns/a||kubectl-create|"}, other.AnnouncedDrift())
	assert.True(t, other.Announced(drift1), "the same drift under another revision is announced")
	assert.False(t, other.Announced(drift2), "drift b was resolved: announcing it again is news")

	n, err := ob.DropPending(func(Message) bool { return true })
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, ob.Enqueue(drift2))
	require.NoError(t, ob.Enqueue(Message{ID: "al", Kind: KindDigest, Keys: []string{"alert/x"}}))
	n, err = ob.DropPending(func(m Message) bool { return m.Keys[0] != "alert/x" })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, ob.Depth())
}

type memStore struct{ data []byte }

func (m *memStore) Load(context.Context) ([]byte, error)   { return m.data, nil }
func (m *memStore) Save(_ context.Context, d []byte) error { m.data = d; return nil }
