package drift_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/drift"
)

// mapLive is a LiveReader over a fixed set of objects.
type mapLive []*unstructured.Unstructured

func (m mapLive) Get(gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, bool) {
	for _, u := range m {
		if u.GroupVersionKind().GroupKind() == gvk.GroupKind() && u.GetNamespace() == ns && u.GetName() == name {
			return u.DeepCopy(), true
		}
	}
	return nil, false
}

func (m mapLive) List(gvk schema.GroupVersionKind, ns string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range m {
		if u.GroupVersionKind().GroupKind() == gvk.GroupKind() && u.GetNamespace() == ns {
			out = append(out, u.DeepCopy())
		}
	}
	return out
}

// TestAuditOfACompactIndexIsAudit checks that the daemon's full audit (a compact index, each
// object decoded while it is compared) reports what comparing the decoded render reports: the
// edited field, the deleted object and the one made by hand.
func TestAuditOfACompactIndexIsAudit(t *testing.T) {
	desired := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{
			parse(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: rag}\n"),
			parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: qdrant, namespace: rag}\ndata: {replicas: \"3\"}\n"),
			parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gone, namespace: rag}\ndata: {a: b}\n"),
			parse(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: api}\nspec: {replicas: 2}\n"),
		}
	}
	edited := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: qdrant, namespace: rag}\ndata: {replicas: \"5\"}\n")
	edited.SetManagedFields([]metav1.ManagedFieldsEntry{mf("kubectl-edit", "Update", "", `{"f:data":{"f:replicas":{}}}`)})
	byHand := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: debug, namespace: rag}\ndata: {x: y}\n")
	byHand.SetManagedFields([]metav1.ManagedFieldsEntry{mf("kubectl-create", "Update", "", `{"f:data":{"f:x":{}}}`)})
	live := mapLive{desired()[0], edited, desired()[3], byHand}
	opts := drift.DefaultOptions()
	opts.Schema = builtins

	want := drift.Audit(desired(), live, opts)
	objs := desired()
	idx := drift.CompactIndex(objs)
	got := drift.AuditIndex(idx, live, opts)
	assert.Empty(t, cmp.Diff(want, got))

	var statuses []string
	for _, o := range got {
		statuses = append(statuses, o.Kind+"/"+o.Name+" "+string(o.Status))
	}
	assert.ElementsMatch(t, []string{"ConfigMap/debug Extra", "ConfigMap/gone Missing", "ConfigMap/qdrant Modified"}, statuses)

	for i, o := range objs {
		assert.Nil(t, o, "element %d of the slice given to CompactIndex", i)
	}
	assert.Equal(t, []drift.Ref{
		{Kind: "ConfigMap", Namespace: "rag", Name: "gone"}, {Kind: "ConfigMap", Namespace: "rag", Name: "qdrant"},
		{Kind: "Namespace", Name: "rag"}, {Group: "apps", Kind: "Deployment", Namespace: "api", Name: "api"},
	}, idx.Refs())
	d, ok := idx.Desired(drift.Ref{Kind: "ConfigMap", Namespace: "rag", Name: "qdrant"})
	require.True(t, ok)
	assert.Equal(t, map[string]any{"replicas": "3"}, d.Object["data"])
}
