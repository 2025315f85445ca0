package audit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestBackgroundRenderOfANewRevision: with RenderedInBackground set, a full audit of an env
// with a report already leaves a new revision's render to the background and says so; the
// render's end is signalled, and the next audit is of the new revision. A render that fails
// (malformed YAML in the new commit) gives its error, naming the file, to the audit after it,
// once: the audit after that renders again. A fix committed meanwhile is what gets audited.
func TestBackgroundRenderOfANewRevision(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, waitRendered := backgroundAuditor(ctx, t, f)
	run := func() error {
		t.Helper()
		rep, err := a.Run(ctx, Request{Env: f.Env})
		if err == nil {
			assert.Equal(t, f.Head, rep.Revision)
		}
		return err
	}

	require.NoError(t, run(), "the first audit renders in the foreground: there is no report to stand")
	require.Empty(t, a.Rendering(f.Env), "no render was left to the background")

	f.Edit("base/api/rag-api.yaml", "rag-api:1.4.2", "rag-api:1.5.0")
	f.Commit("rag-api 1.5.0")
	var rendering *RenderingError
	require.ErrorAs(t, run(), &rendering)
	assert.Equal(t, &RenderingError{Env: f.Env, Revision: f.Head}, rendering)
	assert.Equal(t, f.Head, a.Rendering(f.Env))
	waitRendered()
	assert.Empty(t, a.Rendering(f.Env))
	require.NoError(t, run(), "after the render, the new revision is audited")

	require.NoError(t, f.Write("base/api/broken.yaml", "kind: ConfigMap\nmetadata: {name: [\n"))
	f.Edit("base/api/kustomization.yaml", "resources:\n", "resources:\n  - broken.yaml\n")
	broken := f.Commit("a malformed manifest")
	require.ErrorAs(t, run(), &rendering)
	waitRendered()
	err := run()
	require.Error(t, err)
	assert.NotErrorAs(t, err, &rendering)
	assert.Contains(t, err.Error(), "broken.yaml", "the render's error names the file")
	require.ErrorAs(t, run(), &rendering, "a failed render is tried again by the audit after the one that reported it")
	assert.Equal(t, broken, rendering.Revision)

	// A fix while the failing render runs: it waits for that render, whose error is not
	// reported (its revision is no longer wanted), then is rendered and audited. (The fix is not
	// only a revert: a render of content seen before comes from the cache, with no render.)
	f.Edit("base/api/kustomization.yaml", "  - broken.yaml\n", "")
	f.Edit("base/api/rag-api.yaml", "rag-api:1.5.0", "rag-api:1.5.1")
	f.Commit("drop the malformed manifest")
	for {
		err := run()
		if err == nil {
			break
		}
		require.ErrorAs(t, err, &rendering, "only the fix's audit is reported: %v", err)
		waitRendered()
	}
}

// TestRevertStopsTheRenderItMadeUseless: a commit that makes the env's render slow (3,000 more
// ConfigMaps: seconds of kustomize) starts a background render; `git revert` of it, committed
// while that render runs, is audited at once from the cache (the reverted content was rendered
// before), and the render of the reverted commit is stopped: it never reaches the cache.
func TestRevertStopsTheRenderItMadeUseless(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, waitRendered := backgroundAuditor(ctx, t, f)
	_, err := a.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err)
	before := a.Renders.Stats().Rendered

	var many strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&many, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: bulk-%d, namespace: %s}\ndata: {i: \"%d\"}\n", i, f.NS("api"), i)
	}
	require.NoError(t, f.Write("base/api/bulk.yaml", many.String()))
	f.Edit("base/api/kustomization.yaml", "resources:\n", "resources:\n  - bulk.yaml\n")
	slow := f.Commit("3,000 ConfigMaps")
	_, err = a.Run(ctx, Request{Env: f.Env})
	var rendering *RenderingError
	require.ErrorAs(t, err, &rendering)
	require.Equal(t, slow, rendering.Revision)

	f.Git("revert", "--no-edit", "HEAD")
	revert := f.Git("rev-parse", "HEAD")
	f.Head = revert
	rep, err := a.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err, "the revert's content was rendered before: audited at once")
	assert.Equal(t, revert, rep.Revision)
	assert.Empty(t, a.Rendering(f.Env), "the render of the reverted commit is no longer wanted")

	waitRendered() // the stopped render ends, and says so
	assert.False(t, a.Renders.Knows(f.Env, slow), "the stopped render never reached the cache")
	assert.Equal(t, before, a.Renders.Stats().Rendered, "no render completed: the revert came from the cache")
	rep, err = a.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err, "the stopped render's end is not reported as the env's error")
	assert.Equal(t, revert, rep.Revision)
}

// TestBackgroundRenderTheCacheDoesNotKeep: an env whose kustomization fetches a remote file has
// renders the cache never keeps; a full audit that left its render to the background still gets
// it from the render itself, once, instead of rendering again forever.
func TestBackgroundRenderTheCacheDoesNotKeep(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: upstream, namespace: "+f.NS("api")+"}\ndata: {k: v}\n")
	}))
	defer srv.Close()
	f.Edit("overlays/prod/kustomization.yaml", "resources:\n", "resources:\n  - "+srv.URL+"/upstream.yaml\n")
	f.Commit("a remote file")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, waitRendered := backgroundAuditor(ctx, t, f)
	fullAudit := func() {
		t.Helper()
		_, err := a.Run(ctx, Request{Env: f.Env})
		var rendering *RenderingError
		require.ErrorAs(t, err, &rendering, "nothing to take from the cache: rendered in the background")
		waitRendered()
		rep, err := a.Run(ctx, Request{Env: f.Env})
		require.NoError(t, err, "the render just made is used")
		assert.Equal(t, f.Head, rep.Revision)
		var upstream []string
		for _, o := range rep.Objects {
			if o.Name == "upstream" {
				upstream = append(upstream, string(o.Status))
			}
		}
		assert.Equal(t, []string{"Missing"}, upstream, "the remote file's ConfigMap is rendered, and not in the cluster")
	}
	_, err := a.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err)
	fullAudit() // the same revision again (a resync)
	f.Edit("base/api/rag-api.yaml", "rag-api:1.4.2", "rag-api:1.5.0")
	f.Commit("rag-api 1.5.0")
	fullAudit()
	assert.Equal(t, 3, a.Renders.Stats().Rendered, "one render per full audit, none cached")
}

// backgroundAuditor returns an Auditor of f's env, which follows the branch head (no Argo CD),
// rendering in a render worker and in the background, and a function that waits for the end of
// a background render.
func backgroundAuditor(ctx context.Context, t *testing.T, f *fixture) (*Auditor, func()) {
	t.Helper()
	a := f.watchingAuditor(ctx)
	a.AppName = func(string) string { return "no-such-app" }
	a.Renders.Worker = render.NewWorker()
	rendered := make(chan string, 10)
	a.RenderedInBackground = func(env string) { rendered <- env }
	return a, func() {
		t.Helper()
		select {
		case env := <-rendered:
			require.Equal(t, f.Env, env)
		case <-ctx.Done():
			t.Fatal("the background render never ended")
		}
	}
}

// TestAuditOfTheCachedRenderIsTheAuditOfTheRender: a full audit reads a render the cache holds
// as JSON, one object at a time, and rewrites the namespace of objects Git leaves it out of (the
// destination's) or gives a cluster-scoped one; its report is the one an Auditor without a
// cache (the render decoded whole) makes: a hand edit, an object in the destination namespace,
// a cluster-scoped object stripped of its namespace.
func TestAuditOfTheCachedRenderIsTheAuditOfTheRender(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	require.NoError(t, f.Write("overlays/prod/scoped.yaml", fmt.Sprintf(
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %[1]s-no-namespace}\ndata: {k: v}\n---\n"+
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: %[1]s-cluster-scoped, namespace: %[2]s}\nrules: []\n",
		f.Prefix, f.NS("api"))))
	f.Edit("overlays/prod/kustomization.yaml", "resources:\n", "resources:\n  - scoped.yaml\n")
	f.Commit("objects whose namespace the audit decides")
	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cached, _ := backgroundAuditor(ctx, t, f)
	_, err := cached.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err)
	fromCache, err := cached.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err)
	assert.Equal(t, 1, cached.Renders.Stats().Rendered, "the second audit read the cache")

	decoded, _ := backgroundAuditor(ctx, t, f)
	decoded.Renders = nil
	want, err := decoded.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(want, fromCache))

	assert.Equal(t, drift.Missing, object(t, fromCache, "ConfigMap", f.Prefix+"-no-namespace").Status)
	assert.Equal(t, "default", object(t, fromCache, "ConfigMap", f.Prefix+"-no-namespace").Namespace, "the destination namespace (none: default)")
	assert.Empty(t, object(t, fromCache, "ClusterRole", f.Prefix+"-cluster-scoped").Namespace)
	qdrant := object(t, fromCache, "StatefulSet", "qdrant")
	assert.Equal(t, "3", fmt.Sprint(field(t, fromCache, qdrant, ".spec.replicas").Live))
}
