package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// connect serves opts to an SDK client over the in-memory transport.
func connect(t *testing.T, opts Options) *sdk.ClientSession {
	t.Helper()
	srv, err := New(opts)
	require.NoError(t, err)
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// call calls a tool, checks its structured answer against the tool's declared output schema,
// and returns the answer decoded, with the raw result.
func call[T any](t *testing.T, cs *sdk.ClientSession, name string, args any) (T, *sdk.CallToolResult) {
	t.Helper()
	var out T
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "a tool's failure is a result, not a protocol error")
	if res.IsError {
		return out, res
	}
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &out))
	validate(t, cs, name, data)
	return out, res
}

func validate(t *testing.T, cs *sdk.ClientSession, name string, data []byte) {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tool := range tools.Tools {
		if tool.Name != name {
			continue
		}
		raw, err := json.Marshal(tool.OutputSchema)
		require.NoError(t, err)
		var s jsonschema.Schema
		require.NoError(t, json.Unmarshal(raw, &s))
		rs, err := s.Resolve(nil)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal(data, &v))
		require.NoError(t, rs.Validate(v), "%s's answer against its output schema", name)
		return
	}
	t.Fatalf("no tool %s", name)
}

// errText is the text of a tool's error result.
func errText(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	require.True(t, res.IsError, "want an error result")
	require.NotEmpty(t, res.Content)
	return res.Content[0].(*sdk.TextContent).Text
}

const (
	gitSecret  = "s3cr3t-in-git"
	liveSecret = "s3cr3t-by-hand"
)

// replicasPath is .spec.replicas as a structured path: its JSON is managedFields' strings.
var replicasPath = drift.FieldPath{{FieldName: ptr("spec")}, {FieldName: ptr("replicas")}}

func ptr(s string) *string { return &s }

// fakeCluster answers from one report: alice scaled qwen up by hand, bob edited a Secret.
type fakeCluster struct {
	open  []episode.Episode
	extra []drift.Object // more drifted objects
}

func (fakeCluster) Envs() []string { return []string{"prod"} }

func (f fakeCluster) Report(context.Context, string) (*drift.Report, error) {
	alice := &drift.Actor{User: "alice", Verb: "patch", Time: "2026-12-07T10:00:00Z", Match: "changes"}
	bob := &drift.Actor{User: "bob", Verb: "update", Time: "2026-12-07T11:00:00Z", Match: "changes"}
	rep := &drift.Report{Env: "prod", Revision: "abc123", Objects: []drift.Object{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm", Name: "vllm-qwen", Status: drift.Modified,
			Application: "llm-prod", Source: "overlays/prod",
			Fields: []drift.Field{{Path: ".spec.replicas", FieldPath: replicasPath, Desired: int64(1), Live: int64(3), Change: "changed",
				Writer: drift.Writer{Manager: "kubectl-patch", Operation: "Update", Time: "2026-12-07T10:00:00Z"}, Actor: alice}}},
		{APIVersion: "v1", Kind: "Secret", Namespace: "llm", Name: "hf-token", Status: drift.Modified, Application: "llm-prod",
			Fields: []drift.Field{{Path: ".data.token", Desired: gitSecret, Live: liveSecret, Change: "changed",
				Writer: drift.Writer{Manager: "kubectl-edit", Operation: "Update"}, Actor: bob}}},
	}, Applications: []drift.Application{{Name: "llm-prod", Path: "overlays/prod"}}}
	rep.Objects = append(rep.Objects, f.extra...)
	return rep, nil
}

func (fakeCluster) Blame(_ context.Context, env, _ string, ref blame.Ref) (*blame.Blame, error) {
	if ref.Name != "hf-token" {
		return nil, errors.New("not declared")
	}
	return &blame.Blame{Env: env, Object: blame.Object{APIVersion: "v1", Kind: "Secret", Namespace: "llm", Name: ref.Name},
		Fields: []blame.Field{{Path: ".data.token", Git: blame.Redacted,
			Drift: []drift.Field{{Path: ".data.token", Desired: gitSecret, Live: liveSecret, Change: "changed"}}}}}, nil
}

func (f fakeCluster) Episodes(context.Context, string, int) ([]episode.Episode, []episode.Episode, error) {
	return f.open, nil, nil
}

func TestListsEveryToolReadOnlyAndFiltered(t *testing.T) {
	cs := connect(t, Options{})
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		assert.True(t, tool.Annotations.ReadOnlyHint, tool.Name)
		assert.NotNil(t, tool.OutputSchema, tool.Name)
	}
	assert.ElementsMatch(t, Tools, names)

	res, err = connect(t, Options{Tools: []string{"drift", " explain"}}).ListTools(context.Background(), nil)
	require.NoError(t, err)
	assert.Len(t, res.Tools, 2, "a name as a person types it after a comma")
	_, err = New(Options{Tools: []string{"delete"}})
	assert.ErrorContains(t, err, `no tool "delete"`)
}

func TestClusterToolsWithoutClusterSaySo(t *testing.T) {
	cs := connect(t, Options{})
	object := map[string]any{"env": "prod", "kind": "Deployment", "name": "x"}
	for name, args := range map[string]any{"drift": map[string]any{"env": "prod"}, "explain": object, "blame": object, "episodes": map[string]any{}} {
		_, res := call[map[string]any](t, cs, name, args)
		assert.Contains(t, errText(t, res), "no cluster is configured", name)
	}
}

// errTextOf is the text of an error result, for messages.
func errTextOf(res interface{ GetError() error }) string {
	if err := res.GetError(); err != nil {
		return err.Error()
	}
	return ""
}
