package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// assertRenderParity renders every Application of env's group twice, by the auditor in
// process and by Argo CD's repo-server with the request its controller sends, and compares the
// two as sets of objects, field by field. One difference is legitimate, and is taken out of
// both before the comparison: the tracking annotation (or label) the repo-server writes into
// each object, which is Argo CD's metadata rather than Git's (reposerver.Untrack).
func assertRenderParity(t *testing.T, a *audit.Auditor, env string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NotEmpty(t, cluster.RepoServer, "the test cluster runs Argo CD's repo-server")
	client, err := reposerver.New(reposerver.Config{Address: cluster.RepoServer, Plaintext: true})
	require.NoError(t, err)
	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	cm, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(testcluster.ArgoCDNamespace).
		Get(ctx, "argocd-cm", metav1.GetOptions{})
	require.NoError(t, err)
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	settings, err := reposerver.SettingsFrom(ctx, data)
	require.NoError(t, err)
	srv, err := a.Live.Server()
	require.NoError(t, err)

	renders, err := a.RenderGroup(ctx, audit.Request{Env: env})
	require.NoError(t, err)
	var compared []string
	for _, r := range renders {
		if r.Err != nil {
			continue
		}
		app, err := reposerver.FromUnstructured(getApp(t, r.Name))
		require.NoError(t, err)
		got, err := client.Manifests(ctx, reposerver.Request{App: app, Revisions: reposerver.SyncedRevisions(app),
			KubeVersion: srv.Version, APIVersions: srv.APIVersions, Settings: settings})
		require.NoError(t, err, r.Name)
		reposerver.Untrack(got.Objects, settings)
		reposerver.Untrack(r.Objects, settings)
		dest := app.Spec.Destination.Namespace
		ours, theirs := byRef(t, a, r.Objects, dest), byRef(t, a, got.Objects, dest)
		assert.Equal(t, sortedKeys(theirs), sortedKeys(ours), "%s: the objects the repo-server renders and the auditor's", r.Name)
		for k, o := range ours {
			th, ok := theirs[k]
			if !ok {
				continue
			}
			assert.Empty(t, cmp.Diff(th.Object, o.Object), "%s: %s (- repo-server, + auditor)", r.Name, k)
		}
		t.Logf("%s: %d objects by the repo-server at %v, %d by the auditor", r.Name, len(theirs), got.Revisions, len(ours))
		compared = append(compared, r.Name)
	}
	slices.Sort(compared)
	want = slices.Sorted(slices.Values(want))
	assert.Equal(t, want, compared, "the Applications rendered both ways")
}

// byRef keys a render's objects by group, kind, namespace and name, a namespaced object without
// a namespace in the destination's (where Argo CD's controller puts it).
func byRef(t *testing.T, a *audit.Auditor, objs []*unstructured.Unstructured, dest string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		ns := o.GetNamespace()
		if m, err := a.Live.Mapping(o.GroupVersionKind()); ns == "" && err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns = dest
		}
		k := fmt.Sprintf("%s/%s %s/%s", o.GroupVersionKind().Group, o.GetKind(), ns, o.GetName())
		_, dup := out[k]
		assert.False(t, dup, "%s twice in one render", k)
		out[k] = o
	}
	return out
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// engineSummary is what two audits of one env must agree on whatever renders: per Application,
// its objects, how many drifted and whether it could be audited; every object reported, with
// its status; and every drifted field with Git's value and the live one.
func engineSummary(rep *drift.Report) []string {
	var out []string
	for _, app := range rep.Applications {
		out = append(out, fmt.Sprintf("Application %s: %d objects, %d drifted, audited %v", app.Name, app.Objects, app.Drifted, app.Error == ""))
	}
	for _, o := range rep.Objects {
		out = append(out, fmt.Sprintf("%s %s %s/%s of %s", o.Status, o.Kind, o.Namespace, o.Name, o.Application))
		for _, f := range o.Fields {
			out = append(out, fmt.Sprintf("  %s %s/%s %s: %v → %v", o.Kind, o.Namespace, o.Name, f.Path, f.Desired, f.Live))
		}
	}
	sort.Strings(out)
	return out
}

// engines maps each audited Application of rep to the engine that rendered it.
func engines(rep *drift.Report) map[string]string {
	out := map[string]string{}
	for _, app := range rep.Applications {
		if app.Error == "" {
			out[app.Name] = app.Renderer
		}
	}
	return out
}

// every maps each Application of m to engine.
func every(m map[string]string, engine string) map[string]string {
	out := map[string]string{}
	for name := range m {
		out[name] = engine
	}
	return out
}

// unusedAddress is a loopback address nothing listens on (a port taken, then freed).
func unusedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
