package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestApplicationChangesThatMatter: Argo CD writes an Application's status through the main
// resource at every reconcile (its generation moves); only the spec, the revisions, the state of
// a sync and Argo CD's verdicts change what the audit says.
func TestApplicationChangesThatMatter(t *testing.T) {
	app := func(rv string, mutate func(map[string]any)) *unstructured.Unstructured {
		o := map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": "llm-prod", "namespace": "argocd", "resourceVersion": rv, "generation": int64(7)},
			"spec":     map[string]any{"source": map[string]any{"targetRevision": "main"}},
			"status": map[string]any{"reconciledAt": "2026-11-30T10:00:00Z", "health": map[string]any{"status": "Healthy"},
				"sync": map[string]any{"status": "Synced", "revision": "aaa"}},
		}
		if mutate != nil {
			mutate(o)
		}
		return &unstructured.Unstructured{Object: o}
	}
	old := app("1", nil)
	for _, tc := range []struct {
		name string
		cur  *unstructured.Unstructured
		want bool
	}{
		{"resync, same resourceVersion", app("1", nil), false},
		{"reconciledAt and generation", app("2", func(o map[string]any) {
			o["status"].(map[string]any)["reconciledAt"] = "2026-11-30T10:03:00Z"
			o["metadata"].(map[string]any)["generation"] = int64(8)
		}), false},
		{"health", app("2", func(o map[string]any) {
			o["status"].(map[string]any)["health"] = map[string]any{"status": "Progressing"}
		}), false},
		{"synced revision", app("2", func(o map[string]any) { o["status"].(map[string]any)["sync"].(map[string]any)["revision"] = "bbb" }), true},
		{"spec", app("2", func(o map[string]any) {
			o["spec"].(map[string]any)["source"].(map[string]any)["targetRevision"] = "v2"
		}), true},
		{"a resource's sync status (Argo CD's verdict)", app("2", func(o map[string]any) {
			o["status"].(map[string]any)["resources"] = []any{map[string]any{"group": "apps", "kind": "StatefulSet", "namespace": "llm-rag", "name": "qdrant", "status": "OutOfSync"}}
		}), true},
		{"a sync finished (history)", app("2", func(o map[string]any) {
			o["status"].(map[string]any)["history"] = []any{map[string]any{"id": int64(1), "revision": "aaa"}}
		}), true},
		{"a sync started (operation phase)", app("2", func(o map[string]any) {
			o["status"].(map[string]any)["operationState"] = map[string]any{"phase": "Running"}
		}), true},
		{"a comparison error", app("2", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "ComparisonError", "message": "x"}}
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, changed(argocd.ApplicationGVK, old, tc.cur))
		})
	}
}

// TestDeliveryRecordIsTheHoldersToWrite: a replica the Lease does not name (a deposed leader
// still running) cannot overwrite the delivery record its successor keeps there.
func TestDeliveryRecordIsTheHoldersToWrite(t *testing.T) {
	testcluster.Need(t)
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	ns := cluster.Namespace(t)
	leases := cs.CoordinationV1().Leases(ns)
	ctx := context.Background()
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "auditor"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-b")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	deposed := &leaseRecord{leases: leases, name: "auditor", annotation: recordAnnotation + "slack", identity: "replica-a"}
	require.ErrorIs(t, deposed.Save(ctx, []byte(`{"k":{}}`)), errNotLeader)
	holder := &leaseRecord{leases: leases, name: "auditor", annotation: recordAnnotation + "slack", identity: "replica-b"}
	require.NoError(t, holder.Save(ctx, []byte(`{"k":{}}`)))
	got, err := deposed.Load(ctx)
	require.NoError(t, err)
	assert.JSONEq(t, `{"k":{}}`, string(got), "anyone reads it back")
}

// TestOversizedDeliveryRecordIsNotReadAsADeposedLeader: a record the API server refuses (the
// Lease's annotations past 256 KiB) is said to be refused, not taken for another holder's Lease.
func TestOversizedDeliveryRecordIsNotReadAsADeposedLeader(t *testing.T) {
	testcluster.Need(t)
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	leases := cs.CoordinationV1().Leases(cluster.Namespace(t))
	ctx := context.Background()
	// Another writer's annotation fills the Lease to just under the limit.
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "auditor",
		Annotations: map[string]string{"example.com/notes": strings.Repeat("x", 255<<10)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-b")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	holder := &leaseRecord{leases: leases, name: "auditor", annotation: recordAnnotation + "slack", identity: "replica-b"}
	noise := make([]byte, 8<<10)
	_, _ = rand.Read(noise) // does not compress
	err = holder.Save(ctx, fmt.Appendf(nil, `{"k":%q}`, hex.EncodeToString(noise)))
	require.ErrorIs(t, err, errRecordRejected)
	assert.NotErrorIs(t, err, errNotLeader)
	assert.Contains(t, err.Error(), "metadata.annotations: Too long", "the API server's reason is kept")
}
