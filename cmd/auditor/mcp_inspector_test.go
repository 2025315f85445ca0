package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/mcp"
)

// inspector runs the official MCP Inspector's CLI (npm @modelcontextprotocol/inspector) against
// `auditor mcp ARGS` over stdio and decodes its JSON answer.
func inspector(t *testing.T, bin string, args []string, method ...string) map[string]any {
	t.Helper()
	cmdArgs := append([]string{"-y", "@modelcontextprotocol/inspector", "--cli", bin, "mcp"}, args...)
	cmd := exec.Command("npx", append(cmdArgs, method...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "inspector %v: %s", method, stderr.String())
	var v map[string]any
	require.NoError(t, json.Unmarshal(out, &v), "%s", out)
	return v
}

// TestMCPInspectorListsAndCallsTheTools: a client nobody here wrote lists the tools of `auditor
// mcp` and calls one; its answer validates against the tool's declared output schema.
func TestMCPInspectorListsAndCallsTheTools(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx is not installed: the MCP Inspector (npm @modelcontextprotocol/inspector) runs with npx")
	}
	bin := filepath.Join(t.TempDir(), "auditor")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	repo := []string{"--repo", "../.."}

	list := inspector(t, bin, repo, "--method", "tools/list")
	schemas := map[string]any{}
	for _, tool := range list["tools"].([]any) {
		tool := tool.(map[string]any)
		schemas[tool["name"].(string)] = tool["outputSchema"]
	}
	assert.Len(t, schemas, len(mcp.Tools))

	res := inspector(t, bin, repo, "--method", "tools/call", "--tool-name", "ledger_at", "--tool-arg", "env=prod")
	require.NotEqual(t, true, res["isError"], "%v", res)
	raw, err := json.Marshal(schemas["ledger_at"])
	require.NoError(t, err)
	var s jsonschema.Schema
	require.NoError(t, json.Unmarshal(raw, &s))
	rs, err := s.Resolve(nil)
	require.NoError(t, err)
	assert.NoError(t, rs.Validate(res["structuredContent"]), "ledger_at's answer against its declared schema")
	assert.NotEmpty(t, res["structuredContent"].(map[string]any)["models"])
}
