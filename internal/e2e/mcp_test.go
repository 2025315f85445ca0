package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/daemon/mcp"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to the daemon's /mcp over streamable HTTP.
func mcpSession(ctx context.Context, addr, token string) (*sdk.ClientSession, error) {
	tr := &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
		DisableStandaloneSSE: true, MaxRetries: -1}
	return sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "v0"}, nil).Connect(ctx, tr, nil)
}

// callTool calls a tool and decodes its structured answer into out.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError, "%s: %v", name, res.Content)
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, out))
}

// TestMCPOverHTTPNamesThePeople: alice scales qdrant by hand, bob removes a Git-declared env var
// of rag-api, each with their own credentials; the daemon reads the API server's audit log. An
// MCP client over streamable HTTP, with the API's bearer token, lists the tools and gets drift,
// explain and blame answers naming them, with the fields /api/v1/drift serves. Without the
// token, the session is refused.
func TestMCPOverHTTPNamesThePeople(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	tokenFile := filepath.Join(t.TempDir(), "api-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("mcp-e2e-token\n"), 0o600))
	d := startDaemon(t, f, newChat(t), "api: {auth: token, tokenFile: "+tokenFile+"}", "auditEvents: {file: "+cluster.AuditLog+"}")
	rag, api := f.NS("rag"), f.NS("api")
	kubectl(t, "--context", "alice", "-n", rag, "scale", "statefulset/qdrant", "--replicas=3")
	kubectl(t, "--context", "bob", "-n", api, "set", "env", "deployment/rag-api", "-c", "api", "QDRANT_URL-")

	ctx := context.Background()
	_, err := mcpSession(ctx, d.Addr(), "wrong")
	require.Error(t, err, "a session without the API's token is refused")
	cs, err := mcpSession(ctx, d.Addr(), "mcp-e2e-token")
	require.NoError(t, err)
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	assert.ElementsMatch(t, mcp.Tools, names)

	const replicas, env = ".spec.replicas", ".spec.template.spec.containers[name=api].env[name=QDRANT_URL]"
	var rep drift.Report
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		rep = drift.Report{}
		callTool(t, cs, "drift", map[string]any{"env": "prod"}, &rep)
		return actor(&rep, "qdrant", replicas) == "alice" && actor(&rep, "rag-api", env) == "bob", nil
	})
	require.NoError(t, err, "drift never named alice and bob: %+v", rep.Objects)
	assert.Equal(t, apiDrift(t, d.Addr()), fieldsOf(&rep), "the fields /api/v1/drift serves")

	var ex mcp.Explanation
	callTool(t, cs, "explain", map[string]any{"env": "prod", "kind": "StatefulSet", "name": "qdrant", "namespace": rag}, &ex)
	require.Len(t, ex.Fields, 1)
	assert.Equal(t, "alice", ex.Fields[0].Person)
	assert.EqualValues(t, 1, ex.Fields[0].Git)
	assert.EqualValues(t, 3, ex.Fields[0].Live)
	assert.Contains(t, strings.Join(ex.Restore, "\n"), " --resource apps:StatefulSet:"+rag+"/qdrant")
	require.NotNil(t, ex.Adopt)
	assert.Contains(t, ex.Adopt.Patch, "replicas: 3", "the adopt patch: %+v", ex.Adopt)

	var b blame.Blame
	callTool(t, cs, "blame", map[string]any{"env": "prod", "kind": "Deployment", "name": "rag-api", "namespace": api}, &b)
	var people []string
	for _, fd := range b.Fields {
		for _, dr := range fd.Drift {
			if dr.Actor != nil {
				people = append(people, dr.Actor.User)
			}
		}
	}
	assert.Contains(t, people, "bob", "blame names bob on his field: %+v", b.Fields)
}

// actor is the person the report names on an object's field.
func actor(rep *drift.Report, name, path string) string {
	for _, o := range rep.Objects {
		for _, fd := range o.Fields {
			if o.Name == name && fd.Path == path && fd.Actor != nil {
				return fd.Actor.User
			}
		}
	}
	return ""
}

// fieldsOf lists each drifted field as object, path and person.
func fieldsOf(rep *drift.Report) []string {
	var out []string
	for _, o := range rep.Objects {
		for _, fd := range o.Fields {
			who := fd.Manager
			if fd.Actor != nil {
				who = fd.Actor.User
			}
			out = append(out, o.Kind+"/"+o.Name+" "+fd.Path+" "+fd.Change+" "+who)
		}
	}
	return out
}

// apiDrift is fieldsOf the report GET /api/v1/drift serves.
func apiDrift(t *testing.T, addr string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/drift?env=prod", nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: bearer{"mcp-e2e-token"}}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var rep drift.Report
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	return fieldsOf(&rep)
}
