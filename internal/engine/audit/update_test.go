package audit

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestUpdateEqualsFullAudit makes hand edits one after another and, after each, re-audits only
// the touched object on top of the last report (what the daemon does on a watch event). The
// result must be exactly what a full audit of the same live state says, and must not render.
func TestUpdateEqualsFullAudit(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := f.watchingAuditor(ctx)
	a.AppName = func(string) string { return f.App() }
	cache := a.Live
	var renders int
	a.Timing = func(stage string, _ time.Duration) {
		if stage == "render" {
			renders++
		}
	}
	first, err := a.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err)
	require.True(t, first.InSync, dump(first))

	sts := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	dep := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	svc := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	steps := []struct {
		name    string
		edit    []string
		gvk     schema.GroupVersionKind
		ns, obj string
		drifted bool // the object is in the report afterwards
	}{
		{"scale qdrant", []string{"-n", f.NS("rag"), "scale", "statefulset/qdrant", "--replicas=3"}, sts, f.NS("rag"), "qdrant", true},
		{"hand-made ConfigMap", []string{"-n", f.NS("api"), "create", "configmap", "hotfix", "--from-literal=k=v"}, cm, f.NS("api"), "hotfix", true},
		{"delete a Service", []string{"-n", f.NS("api"), "delete", "service", "rag-api"}, svc, f.NS("api"), "rag-api", true},
		{"scale qdrant back", []string{"-n", f.NS("rag"), "scale", "statefulset/qdrant", "--replicas=1"}, sts, f.NS("rag"), "qdrant", false},
		{"set env", []string{"-n", f.NS("api"), "set", "env", "deployment/rag-api", "LOG_LEVEL=debug"}, dep, f.NS("api"), "rag-api", true},
		{"delete the hand-made ConfigMap", []string{"-n", f.NS("api"), "delete", "configmap", "hotfix"}, cm, f.NS("api"), "hotfix", false},
	}
	for _, s := range steps {
		before, _ := cache.Get(s.gvk, s.ns, s.obj)
		f.Kubectl(s.edit...)
		require.Eventually(t, func() bool { // the watch has delivered the edit
			after, ok := cache.Get(s.gvk, s.ns, s.obj)
			return (before == nil) != (after == nil) || (ok && after.GetResourceVersion() != before.GetResourceVersion())
		}, 30*time.Second, 20*time.Millisecond, s.name)
		rendersBefore := renders
		ref := drift.Ref{Group: s.gvk.Group, Kind: s.gvk.Kind, Namespace: s.ns, Name: s.obj}
		got, err := a.Update(ctx, f.Env, []drift.Ref{ref})
		require.NoError(t, err, s.name)
		require.Equal(t, rendersBefore, renders, "%s: Update rendered: it ran a full audit", s.name)

		full := New(Config{Repo: a.Repo, Live: cache})
		full.AppName = a.AppName
		full.Options.SecretKey = a.Options.SecretKey
		want, err := full.Run(ctx, Request{Env: f.Env})
		require.NoError(t, err, s.name)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: Update differs from a full audit (-full +update):\n%s", s.name, diff)
		}
		var found bool
		for _, o := range got.Objects {
			found = found || drift.RefOfObject(&o) == ref
		}
		require.Equal(t, s.drifted, found, "%s: object in the report\n%s", s.name, dump(got))
	}
}
