package live

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func version(gen int64, rv string, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}
	u.SetName("d")
	u.SetGeneration(gen)
	u.SetResourceVersion(rv)
	u.SetManagedFields(entries)
	return u
}

func entry(manager, subresource string, at time.Time, fields string) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource,
		Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

// TestHistoryKeepsEditsThroughStatusWrites: a rollout's status writes do not push the edit that
// caused it out of the bounded history, and a pure removal (no entry stamped) is kept.
func TestHistoryKeepsEditsThroughStatusWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	apply := entry("argocd-controller", "", t0, `{"f:spec":{}}`)
	v1 := version(1, "1", apply)
	removal := version(2, "2", apply) // kubectl patch removing a field: nobody stamped
	var h history
	h.record(must(t, v1), must(t, removal))
	prev := removal
	for i := range 6 { // the Deployment controller writes status again and again
		st := version(2, string(rune('3'+i)), apply, entry("kube-controller-manager", "status", t0.Add(time.Duration(i+1)*time.Second), `{"f:status":{}}`))
		h.record(must(t, prev), must(t, st))
		prev = st
	}
	vs := h.of(prev)
	var rvs []string
	for _, v := range vs {
		rvs = append(rvs, v.GetResourceVersion())
	}
	assert.Equal(t, []string{prev.GetResourceVersion(), "2", "1"}, rvs, "the current version, the removal, the version before it")
	assert.Len(t, h.of(version(2, "99")), 1, "a version the watch has not reached: only itself")
	edit := version(2, "20", apply, entry("kubectl-edit", "", t0.Add(time.Minute), `{"f:metadata":{}}`))
	assert.False(t, StatusOnly(prev, edit), "a write through the main resource")
	assert.False(t, StatusOnly(prev, version(2, "21", apply)), "a pure removal stamps nothing and is not a status write")
}

func must(t *testing.T, u *unstructured.Unstructured) *stored {
	t.Helper()
	s, ok := storedOf(u)
	require.True(t, ok)
	return s
}
