package argocd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	return u
}

// TestMemoSkipsOnlyWhatItSawInSync: a pair found in sync is not diffed again while the live
// object's resourceVersion and Git's object are unchanged (the API server bumps the
// resourceVersion on every write, so a remembered pair cannot hide a later edit), survives a new
// process through its file, and nothing is kept of a pair found out of sync.
func TestMemoSkipsOnlyWhatItSawInSync(t *testing.T) {
	app, err := FromUnstructured(obj(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: llm-prod, namespace: argocd}
spec:
  project: default
  source: {repoURL: file:///repo, path: overlays/prod}
  destination: {server: https://kubernetes.default.svc}
`))
	require.NoError(t, err)
	desired := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: llm-api}\ndata: {k: v}\n")
	live := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: llm-api, uid: u1, resourceVersion: '10'}\ndata: {k: v}\n")
	file := filepath.Join(t.TempDir(), "verdicts", "prod.json")
	ctx := context.Background()
	verdict := func(m *Memo, d, l *unstructured.Unstructured) bool {
		t.Helper()
		vs, err := app.OutOfSync(ctx, []*unstructured.Unstructured{d}, []*unstructured.Unstructured{l}, nil, m)
		require.NoError(t, err)
		m.Done()
		return vs[0].OutOfSync
	}

	m := NewMemo(file)
	assert.False(t, verdict(m, desired, live), "in sync")
	// The memo answers for the same (Git object, live UID/resourceVersion) without diffing: shown
	// by handing it a pair whose content differs under the same resourceVersion, which the API
	// server never produces.
	forged := live.DeepCopy()
	forged.Object["data"] = map[string]any{"k": "other"}
	assert.False(t, verdict(NewMemo(file), desired, forged), "a new process reads the memo from its file")
	// A real edit bumps the resourceVersion: diffed again, out of sync, and not remembered.
	edited := forged.DeepCopy()
	edited.SetResourceVersion("11")
	assert.True(t, verdict(m, desired, edited))
	assert.True(t, verdict(m, desired, edited))
	// A new render of Git is a new key too.
	changed := desired.DeepCopy()
	changed.Object["data"] = map[string]any{"k": "other"}
	assert.False(t, verdict(m, changed, edited))

	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(data), "other"), "the memo file holds keys only, no values")
}
