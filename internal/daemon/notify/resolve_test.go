package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// TestResolveNamesWhoSetTheFieldBack: the owner of the field now, from managedFields, and how long
// the drift stood; nobody when Git moved (the value may have been adopted) or the object is gone.
func TestResolveNamesWhoSetTheFieldBack(t *testing.T) {
	replicas := drift.FieldPath{}
	require.NoError(t, replicas.UnmarshalJSON([]byte(`["f:spec","f:replicas"]`)))
	item := Item{Key: "k", Env: "prod", Revision: "aaa", Object: drift.Object{Kind: "StatefulSet", Name: "qdrant", Status: drift.Modified,
		Fields: []drift.Field{{Path: ".spec.replicas", FieldPath: replicas, Writer: drift.Writer{Manager: "kubectl-edit", Time: "2026-11-30T10:00:00Z"}}}}}
	live := func(manager, at string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet"}}
		ts, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err)
		u.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: ts},
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:replicas":{}}}`)}},
			{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Time: &metav1.Time{Time: ts},
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}},
		})
		return u
	}
	cases := []struct {
		name     string
		live     *unstructured.Unstructured
		revision string
		want     string // the words of the message; "" for no resolution
	}{
		{"Argo CD's selfHeal, 12 s later", live("argocd-controller", "2026-11-30T10:00:12Z"), "aaa", "reverted by argocd-controller after 12s"},
		{"in the same second", live("argocd-controller", "2026-11-30T10:00:00Z"), "aaa", "reverted by argocd-controller within 1s"},
		{"the editor undid it", live("kubectl-edit", "2026-11-30T10:01:00Z"), "aaa", "set back by kubectl-edit after 1m0s"},
		{"Git moved: perhaps adopted", live("argocd-controller", "2026-11-30T10:00:12Z"), "bbb", ""},
		{"the object is gone", nil, "aaa", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Resolve(item, tc.live, tc.revision)
			if tc.want == "" {
				assert.Nil(t, r)
				return
			}
			require.NotNil(t, r)
			assert.Equal(t, tc.want, r.Verb+" "+r.By.Manager+" "+r.Took())
		})
	}
}
