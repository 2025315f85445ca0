package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// TestDiffAllNeedsTheEnvsInOneNamespace: an audit reads Applications in one namespace, so
// --all over envs the layout puts in two is refused, naming them, before the cluster is read.
func TestDiffAllNeedsTheEnvsInOneNamespace(t *testing.T) {
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, map[string]string{".auditor.yaml": `envs:
  - {name: prod, root: acme-root, namespace: acme-cd}
  - {name: staging, root: acme-staging}
`})
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "layout")
	_, err := runCmd(t, newDiffCommand(), "--all", "--repo", dir, "--kubeconfig", "/nonexistent")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "different namespaces (prod in acme-cd; staging in argocd)")
	assert.Contains(t, err.Error(), "audit each with --env")
	// One env, or a namespace named: the cluster is what fails next.
	for _, args := range [][]string{{"--env", "prod"}, {"--all", "--argocd-namespace", "argocd"}, {"--all", "--app-namespace", "argocd"}} {
		_, err = runCmd(t, newDiffCommand(), append(args, "--repo", dir, "--kubeconfig", "/nonexistent")...)
		require.Error(t, err, "%v", args)
		assert.NotContains(t, err.Error(), "different namespaces", "%v", args)
	}
}
