package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestDoctorExitCodes: on a bare API server (no CRDs) doctor exits 1 naming what to install; with
// a cluster that does not answer it exits 2.
func TestDoctorExitCodes(t *testing.T) {
	testcluster.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{SkipCRDs: true})
	require.NoError(t, err)
	t.Cleanup(c.Stop)

	out, err := runCmd(t, newRootCommand(), "doctor", "--env", "prod", "--repo", "../..", "--kubeconfig", c.Kubeconfig)
	assert.Equal(t, codeFound, exitStatus(io.Discard, err), out)
	assert.Contains(t, out, "✘ api      API keda.sh: not served: v1alpha1 ScaledObject")
	assert.Contains(t, out, "    fix: install KEDA")

	dead := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(dead, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	code, msg := exitAndError(t, "doctor", "--env", "prod", "--repo", "../..", "--kubeconfig", dead)
	assert.Equal(t, codeError, code)
	assert.Contains(t, msg, "unreachable")
}
