package notify

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/drift"
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
		{"another cluster", drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "edge", Name: "cfg", Cluster: "edge-1", Status: drift.Modified}, ".data.k", "kubectl-patch", "abc"},
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
