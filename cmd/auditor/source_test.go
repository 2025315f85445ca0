package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/release"
)

// render says on stderr what it read: the work tree or a commit, and the pin Argo CD syncs a
// pinned env at, which is what diff audits.
func TestRenderSaysWhatItRead(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", release.File("prod")))
	require.NoError(t, err)
	rel, err := release.Parse("prod", data)
	require.NoError(t, err)
	require.True(t, rel.Pinned(), "prod is pinned in this repository")

	cmd := newRenderCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--env", "prod", "--repo", filepath.Join("..", "..")})
	require.NoError(t, cmd.Execute())
	assert.Contains(t, out.String(), "kind: Deployment", "the objects go to stdout")
	assert.Contains(t, errOut.String(), "rendered overlays/prod from the work tree of")
	assert.Contains(t, errOut.String(), "Argo CD syncs prod at its pin "+rel.Revision[:12])
	assert.Contains(t, errOut.String(), "--revision "+rel.Revision)
}
