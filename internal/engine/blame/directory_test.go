package blame

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// TestGitWalksADirectorySourceWithItsOptions: an Application whose directory source recurses and
// evaluates Jsonnet with a top-level argument from Argo CD's build environment is walked with
// those options: its object, in a subdirectory, is found and blamed.
func TestGitWalksADirectorySourceWithItsOptions(t *testing.T) {
	dir, _ := history(t)
	app := `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: llm-jobs, namespace: argocd}
spec:
  project: default
  source:
    repoURL: https://git.example.com/platform.git
    targetRevision: main
    path: jobs
    directory:
      recurse: true
      exclude: 'old/*'
      jsonnet: {tlas: [{name: owner, value: $ARGOCD_APP_NAME}]}
  destination: {server: https://kubernetes.default.svc, namespace: jobs}
`
	job := func(mode string) string {
		return "function(owner) {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'schedule', namespace: 'jobs'}, data: {mode: '" + mode + "', owner: owner}}\n"
	}
	commit := func(msg string, files map[string]string) string {
		gittest.WriteFiles(t, dir, files)
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", msg)
		return gittest.Run(t, dir, "rev-parse", "HEAD")
	}
	added := commit("jobs: the schedule", map[string]string{"apps/prod/kustomization.yaml": "resources: [jobs.yaml]\n",
		"apps/prod/jobs.yaml": app, "jobs/nightly/schedule.jsonnet": job("daily"),
		"jobs/old/schedule.jsonnet": job("never")}) // excluded: else the object would be declared twice
	changed := commit("jobs: hourly", map[string]string{"jobs/nightly/schedule.jsonnet": job("hourly")})
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "ConfigMap", Name: "schedule"}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "llm-jobs", b.Application)
	got := map[string]string{}
	for _, f := range b.Fields {
		require.NotNil(t, f.Commit, f.Path)
		got[f.Path] = f.Commit.SHA
		if f.Path == ".data.owner" {
			assert.Equal(t, "llm-jobs", f.Git, "the argument from the build environment")
		}
	}
	assert.Equal(t, changed, got[".data.mode"])
	assert.Equal(t, added, got[".data.owner"])
}
