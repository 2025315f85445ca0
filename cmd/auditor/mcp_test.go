package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/mcp"
)

// TestMCPServesOnStdioWithoutACluster: the Git tools answer, the cluster tools say there is no
// cluster, and the server ends when the client goes away.
func TestMCPServesOnStdioWithoutACluster(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	cmd := newMCPCommand()
	cmd.SetIn(inR)
	cmd.SetOut(outW)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--repo", "../.."})
	done := make(chan error, 1)
	go func() { done <- cmd.Execute(); _ = outW.Close() }()

	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, tools.Tools, len(mcp.Tools))

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ledger_at", Arguments: map[string]any{"env": "prod"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "ledger_at reads Git alone")
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "drift", Arguments: map[string]any{"env": "prod"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, res.Content[0].(*sdk.TextContent).Text, "no cluster is configured")
	assert.Contains(t, stderr.String(), "no cluster")

	require.NoError(t, cs.Close())
	assert.NoError(t, <-done)
}
