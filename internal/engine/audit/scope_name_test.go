package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// A directory source's document may have no name (Argo CD keeps it, and cannot apply it), or a
// hook only a generateName: neither is compared, each Unknown with its own reason.
func TestScopeNamelessObjectsAreUnknown(t *testing.T) {
	nameless := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}}}
	generated := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"generateName": "job-"}}}
	_, _, unknown, _, err := (&Auditor{}).scope(nil, &render.Result{Env: "prod", Objects: []*unstructured.Unstructured{nameless, generated}}, "ns")
	require.NoError(t, err)
	require.Len(t, unknown, 2)
	assert.Equal(t, "", unknown[0].Name)
	assert.Contains(t, unknown[0].Note, "no name: Argo CD renders it and cannot apply it")
	assert.Equal(t, "job-*", unknown[1].Name)
	assert.Contains(t, unknown[1].Note, "only a generateName")
}
