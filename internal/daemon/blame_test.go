package daemon

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestBlameAPI: GET /api/v1/blame answers what `auditor blame -o json` does, from the daemon's
// own state: the commit that set the vLLM image (walking from the audited revision), alice's live
// edit of it on the field (her person from the followed audit log) and among the writes, with
// old → new. The walk's renders run in render workers, as the audits' do. Bad requests are 400,
// an object Git does not declare 404.
func TestBlameAPI(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	// from the pinned v0.30.0 digest to the v0.30.1 tag
	h.p.Edit("overlays/prod/kustomization.yaml", "newTag: v0.30.0", "newTag: v0.30.1")
	h.p.Edit("overlays/prod/kustomization.yaml", "    digest: sha256:8a69ffad015f138d7170c4ddc429e230a3bc1c1719f67e14324749df200a4b90\n", "")
	imageCommit := h.p.Commit("prod: vLLM v0.30.1")
	h.p.Sync(imageCommit)
	cfg := h.config(t.TempDir())
	cfg.AuditEvents = AuditEventsConfig{File: cluster.AuditLog}
	r := start(t, cfg)
	inference := h.p.NS("inference")
	out, err := editAs("alice", inference, "deployment/vllm-qwen", `s|vllm/vllm-openai:v0.30.1|vllm/vllm-openai:v0.31.0|`)
	require.NoError(t, err, "%s", out)

	api := "http://" + r.d.Addr() + "/api/v1/blame?"
	q := url.Values{"env": {"prod"}, "kind": {"deployment"}, "namespace": {inference}, "name": {"vllm-qwen"}}
	const image = ".spec.template.spec.containers[name=vllm].image"
	var b blame.Blame
	var field blame.Field
	require.Eventually(t, func() bool {
		b, field = blame.Blame{}, blame.Field{}
		if code := getJSON(t, api+q.Encode(), &b); code != http.StatusOK {
			return false
		}
		for _, f := range b.Fields {
			if f.Path == image {
				field = f
			}
		}
		return len(field.Drift) == 1 && field.Drift[0].Actor != nil
	}, 40*time.Second, 200*time.Millisecond, "no drift with a person on the image; last answer: %+v", b)
	assert.Equal(t, imageCommit, b.Revision, "the audited revision")
	walked := r.d.blames.renders.Stats()
	assert.Positive(t, walked.Rendered, "the walk rendered the commits before the audited one")
	assert.Equal(t, walked.Rendered, walked.InWorker, "the walk rendered in render workers, not in the daemon")
	assert.Equal(t, "vllm/vllm-openai:v0.30.1", field.Git)
	require.NotNil(t, field.Commit)
	assert.Equal(t, imageCommit, field.Commit.SHA)
	assert.Equal(t, "prod: vLLM v0.30.1", field.Commit.Subject)
	assert.Equal(t, "vllm/vllm-openai:v0.31.0", field.Drift[0].Live)
	assert.Equal(t, "alice", field.Drift[0].Actor.User)
	require.NotNil(t, b.Live)
	assert.True(t, b.Live.Found)
	assert.True(t, b.Live.AuditEvents)
	var alice *blame.Write
	for i := range b.Writes {
		if b.Writes[i].User == "alice" {
			alice = &b.Writes[i]
			break
		}
	}
	require.NotNil(t, alice, "alice's write: %+v", b.Writes)
	assert.Equal(t, "kubectl-edit", alice.Tool)
	assert.Contains(t, alice.Changes, blame.Change{Path: image, Old: "vllm/vllm-openai:v0.30.1", New: "vllm/vllm-openai:v0.31.0", Change: "changed"})

	var e map[string]any
	assert.Equal(t, http.StatusBadRequest, getJSON(t, api+url.Values{"env": {"prod"}, "kind": {"deployment"}}.Encode(), &e), "no name")
	assert.Equal(t, http.StatusBadRequest, getJSON(t, api+url.Values{"env": {"nope"}, "kind": {"deployment"}, "name": {"x"}}.Encode(), &e), "unknown env")
	assert.Equal(t, http.StatusNotFound, getJSON(t, api+url.Values{"env": {"prod"}, "kind": {"deployment"}, "name": {"nope"}}.Encode(), &e), "not in Git")
	assert.Contains(t, e["error"], "not declared")
}

// getJSON GETs url and decodes its JSON body into v, returning the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	return resp.StatusCode
}

// TestGroupPathsOfABlame: the Application a drifted object is listed under comes first, with the
// object's namespace as its destination; then the others on the cluster asked about. A chart's
// Application, another cluster's and one not audited are left out.
func TestGroupPathsOfABlame(t *testing.T) {
	rep := &drift.Report{Env: "prod",
		Applications: []drift.Application{
			{Name: "edge", Cluster: "edge-1", Path: "edge", Revision: "bbb"},
			{Name: "edge-extras", Cluster: "edge-1", Path: "edge-extras"},
			{Name: "edge-chart", Cluster: "edge-1", Path: "chart vllm from https://charts.example.com"},
			{Name: "edge-down", Cluster: "edge-1", Path: "down", Error: "cluster edge-1 unreachable"},
			{Name: "home", Path: "overlays/prod"},
		},
		Objects: []drift.Object{
			{Kind: "ConfigMap", Namespace: "edge-ns", Name: "edge-settings", Cluster: "edge-1", Application: "edge", Source: "edge"},
			{Kind: "Deployment", Namespace: "edge-ns", Name: "vllm", Cluster: "edge-1", Application: "edge-chart", Source: "chart vllm from https://charts.example.com"},
		}}
	ask := blameAsk{env: "prod", cluster: "edge-1", ref: blame.Ref{Kind: "configmap", Namespace: "edge-ns", Name: "edge-settings"}}
	app, ok := auditedUnder(rep, ask)
	require.True(t, ok)
	assert.Equal(t, "bbb", app.Revision)
	assert.Equal(t, []blame.AppPath{{Name: "edge", Path: "edge", Namespace: "edge-ns"}, {Name: "edge", Path: "edge"}, {Name: "edge-extras", Path: "edge-extras"}},
		groupPaths(rep, ask))

	_, ok = auditedUnder(rep, blameAsk{env: "prod", cluster: "edge-1", ref: blame.Ref{Kind: "deployment", Namespace: "edge-ns", Name: "vllm"}})
	assert.False(t, ok, "a chart's version is no commit to walk from")
	_, ok = auditedUnder(rep, blameAsk{env: "prod", ref: blame.Ref{Kind: "configmap", Namespace: "edge-ns", Name: "edge-settings"}})
	assert.False(t, ok, "on Argo CD's own cluster there is no such drifted object")
}
