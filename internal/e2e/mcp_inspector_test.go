package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// inspector runs the official MCP Inspector's CLI (npm @modelcontextprotocol/inspector) against
// `auditor mcp ARGS` over stdio and decodes its JSON answer.
func inspector(t *testing.T, bin string, args []string, method ...string) map[string]any {
	t.Helper()
	cmdArgs := append([]string{"-y", "@modelcontextprotocol/inspector", "--cli", bin, "mcp"}, args...)
	cmd := exec.Command("npx", append(cmdArgs, method...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "inspector %v: %s", method, stderr.String())
	var v map[string]any
	require.NoError(t, json.Unmarshal(out, &v), "%s", out)
	return v
}

// TestMCPInspectorExplainsAliceEdit: the official MCP Inspector, a client nobody here wrote,
// calls explain on `auditor mcp` over stdio against the real cluster after alice scaled qdrant;
// the answer names her and validates against explain's declared output schema.
func TestMCPInspectorExplainsAliceEdit(t *testing.T) {
	testcluster.Need(t)
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx is not installed: the MCP Inspector (npm @modelcontextprotocol/inspector) runs with npx")
	}
	f := platform(t)
	rag := f.NS("rag")
	kubectl(t, "--context", "alice", "-n", rag, "scale", "statefulset/qdrant", "--replicas=3")
	bin := auditorBinary(t)
	args := []string{"--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--audit-log", cluster.AuditLog, "--cache-dir", "off"}

	var schema any
	for _, tool := range inspector(t, bin, args, "--method", "tools/list")["tools"].([]any) {
		if tool := tool.(map[string]any); tool["name"] == "explain" {
			schema = tool["outputSchema"]
		}
	}
	require.NotNil(t, schema, "explain has an output schema")
	raw, err := json.Marshal(schema)
	require.NoError(t, err)
	var s jsonschema.Schema
	require.NoError(t, json.Unmarshal(raw, &s))
	rs, err := s.Resolve(nil)
	require.NoError(t, err)

	var ex map[string]any
	for try := 0; try < 5; try++ { // the API server writes its audit log in batches
		res := inspector(t, bin, args, "--method", "tools/call", "--tool-name", "explain",
			"--tool-arg", "env=prod", "--tool-arg", "kind=StatefulSet", "--tool-arg", "name=qdrant", "--tool-arg", "namespace="+rag)
		require.NotEqual(t, true, res["isError"], "%v", res)
		ex = res["structuredContent"].(map[string]any)
		if fields, _ := ex["fields"].([]any); len(fields) == 1 && fields[0].(map[string]any)["person"] == "alice" {
			break
		}
		time.Sleep(2 * time.Second)
	}
	assert.NoError(t, rs.Validate(ex), "explain's answer against its declared schema")
	require.Len(t, ex["fields"], 1, "%v", ex)
	field := ex["fields"].([]any)[0].(map[string]any)
	assert.Equal(t, "alice", field["person"])
	assert.Equal(t, ".spec.replicas", field["path"])
	assert.EqualValues(t, 3, field["live"])
	assert.Contains(t, ex["adopt"].(map[string]any)["patch"], "replicas: 3")
}
