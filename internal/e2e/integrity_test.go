package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/reposerver"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestRepoServerRenderKeepsTheProjectsSourceIntegrity: the env's Application, synced by real
// Argo CD, whose AppProject then requires signed commits (sourceIntegrity). Argo CD's controller
// sends that policy with each request; the repo-server verifies the commit against it and keys
// its cache by it. The auditor, rendering through the repo-server, reads the project and sends
// the policy too, so its request is the controller's (and a failed verdict refuses the render).
func TestRepoServerRenderKeepsTheProjectsSourceIntegrity(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	a := newAuditor(t, f)
	client, err := reposerver.New(reposerver.Config{Address: cluster.RepoServer, Plaintext: true})
	require.NoError(t, err)
	a.RepoServer = client
	rep := runAudit(t, a, f.Env)
	require.Len(t, rep.Applications, 1)
	require.Empty(t, rep.Applications[0].Error, "before the policy, the repo-server renders it")
	synced := rep.Applications[0].Revision
	project := f.Kubectl("-n", testcluster.ArgoCDNamespace, "get", "application", f.App(), "-o", "jsonpath={.spec.project}")
	require.NotEmpty(t, project)

	// The project now requires commits signed by a key nobody signed with. (e2e tests run one
	// at a time: no other test sees the policy.)
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "patch", "appproject", project, "--type=merge", "-p",
		`{"spec":{"sourceIntegrity":{"git":{"policies":[{"repos":[{"url":"*"}],"gpg":{"mode":"head","keys":["4AEE18F83AFDEB23"]}}]}}}}`)
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "patch", "appproject", project, "--type=json", "-p", `[{"op":"remove","path":"/spec/sourceIntegrity"}]`)
	})
	rsLog := filepath.Join(cluster.Dir, "argocd-repo-server.log")
	before, err := os.Stat(rsLog)
	require.NoError(t, err)
	b := newAuditor(t, f) // the first one's memo holds its render of that revision
	b.RepoServer = client
	rep = runAudit(t, b, f.Env)
	require.Len(t, rep.Applications, 1)
	// The request carries the policy: the repo-server keys it, as the controller's, by the
	// policy (Argo CD's SourceIntegrity.CacheKey), not "nil".
	data, err := os.ReadFile(rsLog)
	require.NoError(t, err)
	var keys []string
	for _, line := range strings.Split(string(data[before.Size():]), "\n") {
		if strings.Contains(line, "application="+f.App()+" ") && strings.Contains(line, "cacheKey=") {
			keys = append(keys, line[strings.Index(line, "cacheKey="):])
		}
	}
	require.NotEmpty(t, keys, "no request for %s reached the repo-server", f.App())
	for _, k := range keys {
		assert.Contains(t, k, "|&SourceIntegrity{Git:", "the request without the project's policy")
	}
	// This test cluster's repo-server runs without GPG (ARGOCD_GPG_ENABLED=false), so it verifies
	// nothing and Argo CD's controller accepts the commit: the auditor does the same. With GPG on,
	// the verdict comes back failed and the Application is not audited (reposerver.Manifests).
	assert.Empty(t, rep.Applications[0].Error)
	assert.Equal(t, synced, rep.Applications[0].Revision)
}
