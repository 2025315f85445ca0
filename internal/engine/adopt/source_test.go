package adopt

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// TestGroupAdoptsIntoEachApplicationsKustomization: objects of an env's group are adopted where
// their Application renders them. A kustomization gets the patch; a Helm chart, a plain
// directory and what is not a path of the repository get a note and no file.
func TestGroupAdoptsIntoEachApplicationsKustomization(t *testing.T) {
	cm := func(name, source string) drift.Object {
		return drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm", Name: name, Status: drift.Modified,
			Application: name + "-app", Source: source, Fields: []drift.Field{aMode}}
	}
	files := map[string]string{
		"apps/gate/kustomization.yaml": "resources: [cm.yaml]\n",
		"apps/gate/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: api-config, namespace: llm}\ndata: {mode: fast}\n",
		"charts/api/Chart.yaml":        "apiVersion: v2\nname: api\nversion: 0.1.0\n",
		"extras/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extras, namespace: llm}\n",
	}
	dir := gitRepo(t, files)
	gate := cm("api-config", "apps/gate")
	gate.Application = "gate"
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	head := git(t, dir, "rev-parse", "HEAD")
	a, err := Group("prod", head, repo.ReadFile, gate, cm("chart", "charts/api"), cm("dir", "extras"),
		cm("repo", "chart svc from https://charts.example.com"), cm("opts", "apps/gate with opts-app's kustomize options"),
		cm("root", "clusters/prod/root.yaml"), cm("helm", "Helm chart charts/api"))
	require.NoError(t, err)
	assert.Equal(t, 1, a.Fields)
	assert.Contains(t, a.Diff, "apps/gate/kustomization.yaml")
	assert.NotContains(t, a.Diff, "overlays/", "nothing is written into the env's overlay")
	assert.ElementsMatch(t, []string{
		"ConfigMap llm/chart: its Application chart-app renders the Helm chart charts/api: set the value in its values (the Application's valuesObject or a values file)",
		"ConfigMap llm/dir: its Application dir-app renders the plain directory extras: edit the object's file there",
		"ConfigMap llm/repo: its Application repo-app renders chart svc from https://charts.example.com: no patch is written for it; change it there",
		"ConfigMap llm/opts: its Application opts-app renders apps/gate with opts-app's kustomize options: no patch is written for it; change it there",
		"ConfigMap llm/root: it is declared in clusters/prod/root.yaml, applied by hand: edit it there",
		"ConfigMap llm/helm: its Application helm-app renders the Helm chart charts/api: set the value in its values (the Application's valuesObject or a values file)",
	}, a.Notes)

	applyPatch(t, dir, a.Diff)
	src, err := render.FromDir(dir)
	require.NoError(t, err)
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: render.AppTarget("apps/gate")})
	require.NoError(t, err)
	require.Len(t, res.Objects, 1)
	assert.Equal(t, "safe", res.Objects[0].Object["data"].(map[string]any)["mode"], "rendered with the patch, the field is its live value")
}

// TestGroupReadsEachApplicationAtItsRevision: an object whose Application syncs another revision
// than the report's is adopted against that revision's files, and a note says so.
func TestGroupReadsEachApplicationAtItsRevision(t *testing.T) {
	dir := gitRepo(t, map[string]string{
		"apps/gate/kustomization.yaml": "resources: [cm.yaml]\n",
		"apps/gate/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: api-config, namespace: llm}\ndata: {mode: fast}\n",
	})
	synced := git(t, dir, "rev-parse", "HEAD")
	gittest.WriteFiles(t, dir, map[string]string{"apps/gate/kustomization.yaml": "# moved on\nresources: [cm.yaml]\n"})
	git(t, dir, "commit", "-qam", "the gate moves on")
	pinned := git(t, dir, "rev-parse", "HEAD")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	o := drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm", Name: "api-config", Status: drift.Modified,
		Application: "gate", Source: "apps/gate", Revision: synced, Fields: []drift.Field{aMode}}
	a, err := Group("prod", pinned, repo.ReadFile, o)
	require.NoError(t, err)
	assert.NotContains(t, a.Diff, "# moved on", "read at the Application's revision, not the report's")
	assert.Contains(t, a.Notes, "the patch of apps/gate is written against "+synced[:12]+", the revision its Application syncs")
}
