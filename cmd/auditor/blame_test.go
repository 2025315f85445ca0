package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// TestBlameReadsTheLayout: in a repository of another layout (.auditor.yaml: a root over
// clusters/prod/apps, no overlays/), `blame --git-only` walks the path of the Application that
// renders the object and says so; an env the layout does not list is a usage error listing it.
func TestBlameReadsTheLayout(t *testing.T) {
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, gittest.ReadTree(t, "../../internal/engine/layout/testdata/acme", "."))
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "acme")
	gittest.WriteFiles(t, dir, map[string]string{"services/web/prod/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n"})
	gittest.Run(t, dir, "commit", "-qam", "web: 5 replicas")
	head := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))

	cmd := newBlameCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"Deployment/web", "-n", "acme-web", "--env", "prod", "--git-only", "--repo", dir, "-o", "json"})
	require.NoError(t, cmd.Execute(), errOut.String())
	var b blame.Blame
	require.NoError(t, json.Unmarshal(out.Bytes(), &b))
	assert.Equal(t, "acme-web", b.Application)
	assert.Equal(t, "services/web/prod", b.Path)
	var replicas *blame.Commit
	for _, f := range b.Fields {
		if f.Path == ".spec.replicas" {
			replicas = f.Commit
		}
	}
	require.NotNil(t, replicas)
	assert.Equal(t, head, replicas.SHA)
	assert.Equal(t, "web: 5 replicas", replicas.Subject)
	assert.Equal(t, "auditor: blamed Deployment acme-web/web in services/web/prod (Application acme-web) from "+dir+" at HEAD ("+head[:12]+
		"), 2 first-parent commits back; the cluster was not read (--git-only)\n", errOut.String())

	_, err := runCmd(t, newBlameCommand(), "Deployment/web", "--env", "staging", "--git-only", "--repo", dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown env "staging" (known envs: prod)`)
}

// TestAuditedApplicationsOfABlame: the Application the audit lists the object under comes
// first, in the namespace asked for; then the env's others on Argo CD's own cluster that render
// a path of the repository.
func TestAuditedApplicationsOfABlame(t *testing.T) {
	rep := &drift.Report{
		Applications: []drift.Application{
			{Name: "acme-worker", Path: "charts/worker"},
			{Name: "acme-web", Path: "services/web/prod"},
			{Name: "edge", Path: "edge", Cluster: "east"},
			{Name: "broken", Path: "broken", Error: "does not render"},
			{Name: "ingress", Path: "chart ingress-nginx 4.1.0"},
		},
		Objects: []drift.Object{{Kind: "Deployment", Namespace: "acme-web", Name: "web", Application: "acme-web", Source: "services/web/prod"}},
	}
	got := auditedApplications(rep, blame.Ref{Kind: "deployment", Namespace: "acme-web", Name: "web"})
	want := []blame.AppPath{{Name: "acme-web", Path: "services/web/prod", Namespace: "acme-web"},
		{Name: "acme-worker", Path: "charts/worker"}, {Name: "acme-web", Path: "services/web/prod"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
