package mcp

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

func TestDriftNamesThePersonAndMasksSecrets(t *testing.T) {
	cs := connect(t, Options{Cluster: fakeCluster{}})
	rep, res := call[drift.Report](t, cs, "drift", map[string]any{})
	require.False(t, res.IsError, "the one env needs no name")
	require.Len(t, rep.Objects, 2)
	assert.Equal(t, "alice", rep.Objects[0].Fields[0].Actor.User)
	assert.Equal(t, "bob", rep.Objects[1].Fields[0].Actor.User)
	noSecret(t, res)

	rep, _ = call[drift.Report](t, cs, "drift", map[string]any{"env": "prod", "application": "llm-prod"})
	assert.Len(t, rep.Objects, 2)
	_, res = call[drift.Report](t, cs, "drift", map[string]any{"env": "prod", "application": "nope"})
	assert.Contains(t, errText(t, res), "env prod has no Application nope")
	_, res = call[drift.Report](t, cs, "drift", map[string]any{"env": "staging"})
	assert.Contains(t, errText(t, res), "env: name one of prod")
}

func TestExplainGivesFieldsPersonRestoreAndEpisodes(t *testing.T) {
	open := []episode.Episode{{ID: "e1", Env: "prod", Kind: "Deployment", Namespace: "llm", Name: "vllm-qwen", Path: ".spec.replicas"}}
	cs := connect(t, Options{Cluster: fakeCluster{open: open}})
	ex, res := call[Explanation](t, cs, "explain", map[string]any{"kind": "deployment", "name": "vllm-qwen"})
	require.False(t, res.IsError, errTextOf(res))
	assert.Equal(t, drift.Modified, ex.Status)
	require.Len(t, ex.Fields, 1)
	f := ex.Fields[0]
	assert.Equal(t, ExplainedField{Path: ".spec.replicas", Change: "changed", Git: float64(1), Live: float64(3),
		Manager: "kubectl-patch", Operation: "Update", Time: "2026-12-07T10:00:00Z", Person: "alice",
		Actor: &drift.Actor{User: "alice", Verb: "patch", Time: "2026-12-07T10:00:00Z", Match: "changes"}}, f)
	assert.Equal(t, []string{"argocd app sync llm-prod --resource apps:Deployment:llm/vllm-qwen",
		"auditor render --env prod --revision abc123 | kubectl apply --server-side --field-manager=argocd-controller --force-conflicts -f -"}, ex.Restore)
	require.Len(t, ex.Episodes, 1)
	assert.Equal(t, "e1", ex.Episodes[0].ID)
	require.NotNil(t, ex.Adopt)
	assert.Contains(t, ex.Adopt.Notes[0], "no repository is configured", "without a repository no patch is written")

	ex, _ = call[Explanation](t, cs, "explain", map[string]any{"kind": "ConfigMap", "name": "other"})
	assert.Equal(t, NotDrifted, ex.Status, "the report cannot tell in sync from not rendered")
	assert.Contains(t, ex.Note, "in sync if one of its Applications renders it")
}

func TestSecretEditedByHandIsOnlyChanged(t *testing.T) {
	cs := connect(t, Options{Cluster: fakeCluster{}})
	ex, res := call[Explanation](t, cs, "explain", map[string]any{"env": "prod", "kind": "Secret", "name": "hf-token"})
	require.False(t, res.IsError, errTextOf(res))
	noSecret(t, res)
	require.Len(t, ex.Fields, 1)
	assert.Equal(t, ExplainedField{Path: ".data.token", Change: "changed", Secret: true, Manager: "kubectl-edit", Operation: "Update", Time: "2026-12-07T11:00:00Z",
		Person: "bob", Actor: &drift.Actor{User: "bob", Verb: "update", Time: "2026-12-07T11:00:00Z", Match: "changes"}}, ex.Fields[0])
	assert.Contains(t, ex.Adopt.Notes[0], "values of a Secret are never shown")

	b, res := call[blame.Blame](t, cs, "blame", map[string]any{"kind": "Secret", "name": "hf-token", "namespace": "llm"})
	require.False(t, res.IsError, errTextOf(res))
	noSecret(t, res)
	assert.Equal(t, blame.Redacted, b.Fields[0].Git)
}

func TestEpisodesFilterByPersonObjectAndTime(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	open := []episode.Episode{
		{ID: "a", Env: "prod", Kind: "Deployment", Name: "vllm-qwen", Start: at, Actor: &drift.Actor{User: "alice"}},
		{ID: "b", Env: "prod", Kind: "Secret", Name: "hf-token", Start: at.Add(time.Hour), Writer: drift.Writer{Manager: "kubectl-edit"}},
	}
	cs := connect(t, Options{Cluster: fakeCluster{open: open}})
	for _, tc := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{}, []string{"a", "b"}},
		{map[string]any{"person": "alice"}, []string{"a"}},
		{map[string]any{"person": "kubectl-edit"}, []string{"b"}},
		{map[string]any{"kind": "secret", "name": "hf-token"}, []string{"b"}},
		{map[string]any{"until": "2026-12-07T10:30:00Z"}, []string{"a"}},
	} {
		got, res := call[Episodes](t, cs, "episodes", tc.args)
		require.False(t, res.IsError, errTextOf(res))
		var ids []string
		for _, e := range got.Open {
			ids = append(ids, e.ID)
		}
		assert.Equal(t, tc.want, ids, "%v", tc.args)
	}
}

// noSecret checks that neither Secret value appears anywhere in the answer.
func noSecret(t *testing.T, res any) {
	t.Helper()
	data, err := json.Marshal(res)
	require.NoError(t, err)
	assert.NotContains(t, string(data), gitSecret)
	assert.NotContains(t, string(data), liveSecret)
}

func TestExplainSaysWhatAHandEditToAnApplicationDisables(t *testing.T) {
	app := drift.Object{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Namespace: "argocd", Name: "llm-prod", Status: drift.Modified,
		Fields: []drift.Field{{Path: ".spec.syncPolicy.automated.selfHeal", Desired: true, Live: false, Change: "changed"}}}
	cs := connect(t, Options{Cluster: fakeCluster{extra: []drift.Object{app}}})
	ex, res := call[Explanation](t, cs, "explain", map[string]any{"kind": "Application", "name": "llm-prod"})
	require.False(t, res.IsError, errTextOf(res))
	require.Len(t, ex.Fields, 1)
	assert.Contains(t, ex.Fields[0].Disables, "self-heal")
}

func TestAnObjectOnTwoClustersIsNamedByItsCluster(t *testing.T) {
	rep := &drift.Report{Objects: []drift.Object{
		{Kind: "Deployment", Namespace: "llm", Name: "vllm-qwen", Cluster: "eu", Status: drift.Modified},
		{Kind: "Deployment", Namespace: "llm", Name: "vllm-qwen", Cluster: "us", Status: drift.Modified},
	}}
	_, err := findObject(rep, ObjectInput{Kind: "Deployment", Name: "vllm-qwen"})
	assert.ErrorContains(t, err, "several places (llm on eu, llm on us): name its namespace or cluster")
	o, err := findObject(rep, ObjectInput{Kind: "Deployment", Name: "vllm-qwen", Cluster: "us"})
	require.NoError(t, err)
	assert.Equal(t, "us", o.Cluster)
}
