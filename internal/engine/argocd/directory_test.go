package argocd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// A source's directory options are rendered in process: the synced source's, the override
// files', each source's of a multi-source Application, with the build environment of the
// revision rendered for the Jsonnet values.
func TestDirectoryOptionsAreTheSyncedSources(t *testing.T) {
	a, err := FromUnstructured(decode(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: jobs, namespace: argocd}
spec:
  project: batch
  source:
    repoURL: https://git.example.com/p.git
    path: jobs
    targetRevision: main
    directory: {recurse: true, include: '*.jsonnet'}
  destination: {server: https://kubernetes.default.svc, namespace: batch}
status:
  sync: {status: Synced, revision: abcdef0123456789}
  history:
  - id: 1
    revision: abcdef0123456789
    source:
      repoURL: https://git.example.com/p.git
      path: jobs
      directory:
        recurse: true
        exclude: 'old/*'
        jsonnet:
          tlas: [{name: app, value: '$ARGOCD_APP_NAME-$ARGOCD_APP_REVISION_SHORT'}, {name: count, value: '3', code: true}]
          extVars: [{name: ns, value: $ARGOCD_APP_NAMESPACE}]
          libs: [vendor]
`))
	require.NoError(t, err)
	assert.Empty(t, a.Unrenderable, "rendered in process")
	got := a.DirectoryOptions("abcdef0123456789")
	require.NotNil(t, got)
	env := got.Jsonnet.Env
	assert.Equal(t, "jobs", env["ARGOCD_APP_NAME"])
	assert.Equal(t, "abcdef0", env["ARGOCD_APP_REVISION_SHORT"])
	assert.Equal(t, "batch", env["ARGOCD_APP_NAMESPACE"])
	assert.Equal(t, "batch", env["ARGOCD_APP_PROJECT_NAME"])
	want := &render.DirectoryOptions{Recurse: true, Exclude: "old/*", Jsonnet: render.JsonnetOptions{
		TLAs:    []render.JsonnetVar{{Name: "app", Value: "$ARGOCD_APP_NAME-$ARGOCD_APP_REVISION_SHORT"}, {Name: "count", Value: "3", Code: true}},
		ExtVars: []render.JsonnetVar{{Name: "ns", Value: "$ARGOCD_APP_NAMESPACE"}},
		Libs:    []string{"vendor"}, Env: env}}
	assert.Empty(t, cmp.Diff(want, got), "the synced source's options, not the spec's (-want +got)")

	over, err := a.WithOverrides(files(map[string]string{"jobs/.argocd-source.yaml": "directory: {recurse: false, include: 'a.yaml', jsonnet: null}\n"}))
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(&render.DirectoryOptions{Exclude: "old/*", Include: "a.yaml"}, over.DirectoryOptions("abcdef0123456789")), "merged as Argo CD merges it")
	assert.False(t, over.RendersAs(a), "other options render otherwise")

	multi, err := FromUnstructured(decode(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: multi, namespace: argocd}
spec:
  sources:
  - {repoURL: https://git.example.com/p.git, path: overlays/prod, targetRevision: main}
  - {repoURL: https://git.example.com/p.git, path: extras, targetRevision: main, directory: {recurse: true}}
  destination: {server: https://kubernetes.default.svc, namespace: ns}
`))
	require.NoError(t, err)
	assert.Empty(t, multi.Unrenderable)
	assert.Nil(t, multi.SourceDirectoryOptions(0, "r"))
	assert.Equal(t, &render.DirectoryOptions{Recurse: true}, multi.SourceDirectoryOptions(1, "r"), "no Jsonnet values: no environment")
}

// Argo CD's controller drops a directory block that sets no option (argo.NormalizeSource) before
// it renders: the path's type is then found from what it holds. An Application declared in Git
// so is read as Argo CD's controller reads it.
func TestDirectoryBlockWithoutOptionsIsNormalizedAway(t *testing.T) {
	app := func(directory string) *App {
		a, err := FromUnstructured(decode(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: web, namespace: argocd}
spec:
  project: default
  source: {repoURL: https://git.example.com/p.git, path: overlays/prod, targetRevision: main, directory: `+directory+`}
  destination: {server: https://kubernetes.default.svc, namespace: web}
`))
		require.NoError(t, err)
		return a
	}
	for _, d := range []string{"{}", "{recurse: false}", "{jsonnet: {}}", "{recurse: false, jsonnet: {tlas: [], extVars: [], libs: []}}"} {
		assert.Nil(t, app(d).DirectoryOptions("r"), "directory: %s is dropped: kustomize, Helm or a directory by what the path holds", d)
		git := app(d)
		assert.Nil(t, (&App{Name: "web", Namespace: "argocd"}).WithGitSpec(git).DirectoryOptions("r"), "declared in Git: %s", d)
	}
	assert.Equal(t, &render.DirectoryOptions{Include: "*.yaml"}, app("{include: '*.yaml'}").DirectoryOptions("r"), "include alone is kept: a directory source")
	assert.Equal(t, &render.DirectoryOptions{Exclude: "x/*", Include: "*.yaml"}, app("{include: '*.yaml', exclude: 'x/*', recurse: false}").DirectoryOptions("r"))
	assert.Equal(t, &render.DirectoryOptions{Recurse: true}, app("{recurse: true}").DirectoryOptions("r"))
	assert.Equal(t, &render.DirectoryOptions{DisableExtensionFilter: true}, app("{disableExtensionFilter: true}").DirectoryOptions("r"))
	assert.True(t, app("{}").RendersAs(app("null")), "directory: {} renders as no directory block")
}

// Argo CD's controller names an Application outside its control plane's namespace
// <namespace>_<name> to the repo-server (Application.InstanceName): $ARGOCD_APP_NAME is that.
func TestBuildEnvironmentNamesTheInstance(t *testing.T) {
	app := func(namespace string) *App {
		a, err := FromUnstructured(decode(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: jobs, namespace: `+namespace+`}
spec:
  project: batch
  source:
    repoURL: https://git.example.com/p.git
    path: jobs
    directory: {jsonnet: {tlas: [{name: app, value: $ARGOCD_APP_NAME}]}}
  destination: {server: https://kubernetes.default.svc, namespace: batch}
`))
		require.NoError(t, err)
		return a
	}
	name := func(a *App) string { return a.DirectoryOptions("r").Jsonnet.Env["ARGOCD_APP_NAME"] }
	assert.Equal(t, "jobs", name(app("argocd")), "in Argo CD's namespace (the default control plane)")
	assert.Equal(t, "team-a_jobs", name(app("team-a")), "elsewhere: <namespace>_<name>")
	assert.Equal(t, "jobs", name(app("team-a").WithControlPlane("team-a")), "in a control plane of its own namespace")
	assert.Equal(t, "argocd_jobs", name(app("argocd").WithControlPlane("gitops")))
	assert.Equal(t, "team-a_jobs", name((&App{Name: "jobs", Namespace: "team-a"}).WithGitSpec(app("team-a")).WithControlPlane("argocd")), "Git's spec, the live name")
	assert.Equal(t, "team-a_jobs", app("team-a").InstanceName())
}
