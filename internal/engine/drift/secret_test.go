package drift_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// TestInstallKey: made once (0600, 32 random bytes), the same on every later call; a damaged
// file is an error that says what to do, not a silently new key.
func TestInstallKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "secret-hmac.key")
	k1, err := drift.InstallKey(path)
	require.NoError(t, err)
	assert.Len(t, k1, 32)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	k2, err := drift.InstallKey(path)
	require.NoError(t, err)
	assert.Equal(t, k1, k2)
	entries, _ := os.ReadDir(filepath.Dir(path))
	assert.Len(t, entries, 1, "no temporary file left beside the key")

	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err = drift.InstallKey(path)
	assert.ErrorContains(t, err, "remove it to make a new one")
}

// TestClientSideApplyOfASecretLeaksNothing: a person re-applies a Secret Git declares without
// annotations with client-side kubectl apply (which keeps the whole object, data included, in
// last-applied-configuration), a new password and an annotation of their own. The report names
// the password as changed (masked) and the annotation alone: the data never appears in clear.
func TestClientSideApplyOfASecretLeaksNothing(t *testing.T) {
	git := "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: ns1}\ntype: Opaque\ndata: {password: aHVudGVyMg==}\n"
	d, l := parse(t, git), parse(t, git)
	l.Object["data"] = map[string]any{"password": "czNjcjN0LW5ldw=="}
	l.SetAnnotations(map[string]string{"owner": "bob",
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","data":{"password":"czNjcjN0LW5ldw=="},"kind":"Secret","metadata":{"annotations":{"owner":"bob"},"name":"db","namespace":"ns1"},"type":"Opaque"}`})
	l.SetResourceVersion("4")
	l.SetManagedFields([]metav1.ManagedFieldsEntry{
		mf("argocd-controller", "Apply", "", `{"f:type":{}}`),
		mf("kubectl-client-side-apply", "Update", "", `{"f:data":{"f:password":{}},"f:metadata":{"f:annotations":{".":{},"f:owner":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}}}`),
	})
	opts := drift.DefaultOptions()
	opts.Schema = builtins
	opts.SecretKey = []byte("k")
	o := drift.CompareObject(d, l, nil, &opts)
	require.NotNil(t, o)
	out, err := json.Marshal(o)
	require.NoError(t, err)
	assert.NotContains(t, string(out), "czNjcjN0LW5ldw==")
	var paths []string
	for _, f := range o.Fields {
		paths = append(paths, f.Path)
		if f.Path == ".metadata.annotations" {
			assert.Equal(t, map[string]any{"owner": "bob"}, f.Live)
		}
	}
	assert.Equal(t, []string{".data.password", ".metadata.annotations"}, paths)
}
