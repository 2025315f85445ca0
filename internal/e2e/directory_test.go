package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// copyArgoCDFixture copies a directory of Argo CD's own e2e test data (test/e2e/testdata in the
// argo-cd module) into the fixture's repository at dest.
func copyArgoCDFixture(t *testing.T, f *testfixture.Platform, name, dest string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v3").Output()
	require.NoError(t, err, "the argo-cd module")
	root := filepath.Join(strings.TrimSpace(string(out)), "test", "e2e", "testdata", name)
	require.NoError(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		return f.Write(filepath.Join(dest, rel), string(data))
	}))
}

// TestDirectorySourcesWithOptions: a root Application, synced by real Argo CD, declares
// Applications over Argo CD's own e2e fixtures with directory options — recurse with an exclude
// (hydrator-directory beside crd-version-differences, which is left out), an include
// (crd-version-differences' CRD alone, as TestAppSyncWrongVersion syncs it), Jsonnet with
// top-level arguments (jsonnet-tla-cm) and with external variables (jsonnet-ext-var) from the
// build environment, and two Jsonnet files with an escaped $ — and each is rendered in process
// as Argo CD's repo-server renders it. A hand edit of their objects is drift of the Application
// that declares them, as Argo CD says; a file Git deletes from the recursed subdirectory, left by
// a sync without prune, is Extra.
func TestDirectorySourcesWithOptions(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	root := f.Prefix + "-root-prod"
	recurse, include, tla, ext, escaped := f.Prefix+"-dir-recurse", f.Prefix+"-dir-include", f.Prefix+"-dir-tla", f.Prefix+"-dir-ext", f.Prefix+"-dir-escaped"
	nss := map[string]string{}
	for _, app := range []string{recurse, tla, ext, escaped} {
		nss[app] = app
		f.Kubectl("create", "namespace", app)
	}
	nss[include] = nss[recurse]
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", recurse, include, tla, ext, escaped, "--ignore-not-found", "--wait=true", "--timeout=2m")
		for _, app := range []string{recurse, tla, ext, escaped} {
			f.Kubectl("delete", "namespace", app, "--ignore-not-found", "--wait=false")
		}
	})

	copyArgoCDFixture(t, f, "hydrator-directory", "argocd/dirs/hydrator-directory")
	copyArgoCDFixture(t, f, "crd-version-differences", "argocd/dirs/crd-version-differences")
	copyArgoCDFixture(t, f, "jsonnet-tla-cm", "argocd/jsonnet-tla-cm")
	copyArgoCDFixture(t, f, "jsonnet-ext-var", "argocd/jsonnet-ext-var")
	for _, name := range []string{"a", "b"} { // the second file's argument is substituted twice by Argo CD
		require.NoError(t, f.Write("argocd/escaped/"+name+".jsonnet",
			"function(v) {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: '"+name+"'}, data: {v: v}}\n"))
	}
	source := func(path string, directory map[string]any) map[string]any {
		return map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": path, "directory": directory}
	}
	fromEnv := []any{map[string]any{"name": "foo", "value": "$ARGOCD_APP_NAME"}, map[string]any{"name": "bar", "value": "'$ARGOCD_APP_NAME'", "code": true}}
	apps := map[string]map[string]any{
		recurse: source("argocd/dirs", map[string]any{"recurse": true, "exclude": "crd-version-differences/*"}),
		include: source("argocd/dirs/crd-version-differences", map[string]any{"include": "crd-v1alpha1.yaml"}),
		tla:     source("argocd/jsonnet-tla-cm", map[string]any{"jsonnet": map[string]any{"tlas": fromEnv}}),
		ext:     source("argocd/jsonnet-ext-var", map[string]any{"jsonnet": map[string]any{"extVars": fromEnv}}),
		escaped: source("argocd/escaped", map[string]any{"jsonnet": map[string]any{"tlas": []any{map[string]any{"name": "v", "value": "$$ARGOCD_APP_NAME-x"}}}}),
	}
	rootDir := "apps/" + f.Prefix + "-root"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	for name, src := range apps {
		app := childApp(name, nss[name], map[string]any{"source": src})
		app["spec"].(map[string]any)["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": false, "selfHeal": false},
			"syncOptions": []any{"ServerSideApply=true"}}
		writeYAML(t, f, rootDir+"/"+name+".yaml", app)
	}
	head := f.Commit("a root over Argo CD's directory fixtures, with directory options")
	applyRoot(t, f, root, rootDir)
	ctx := context.Background()
	for _, app := range []string{root, recurse, include, tla, ext, escaped} {
		require.NoError(t, cluster.WaitSynced(ctx, app, head, 4*time.Minute), app)
	}
	waitComparedSynced(t, f, root)

	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	rep := runAudit(t, a, f.Env)
	objects := map[string]int{}
	for _, app := range rep.Applications {
		assert.Empty(t, app.Error, app.Name)
		objects[app.Name] = app.Objects
	}
	for app, n := range map[string]int{recurse: 2, include: 1, tla: 1, ext: 1, escaped: 2} {
		assert.Equal(t, n, objects[app], "%s's objects audited", app)
		assert.Len(t, trackedResources(getApp(t, app)), n, "%s's objects Argo CD tracks", app)
	}
	assert.True(t, rep.InSync, "right after Argo CD's sync:\n%s", dump(rep))
	// What Argo CD applied: the arguments and variables from its build environment.
	for _, app := range []string{tla, ext} {
		assert.Equal(t, `{"bar":"`+app+`","foo":"`+app+`"}`, f.Kubectl("-n", nss[app], "get", "configmap", "my-map", "-o", "jsonpath={.data}"))
	}
	assert.Equal(t, "$ARGOCD_APP_NAME-x "+escaped+"-x", f.Kubectl("-n", nss[escaped], "get", "configmap", "a", "b", "-o", "jsonpath={.items[*].data.v}"),
		"the escaped $ of the second file substituted again")
	assertRenderParity(t, a, f.Env, []string{root, f.App(), recurse, include, tla, ext, escaped})

	// By hand: the recursed subdirectory's ConfigMap and the Jsonnet argument's.
	f.Kubectl("-n", nss[recurse], "patch", "configmap", "my-map-subdir", "--type=merge", `-p={"data":{"message":"by-hand"}}`)
	f.Kubectl("-n", nss[tla], "patch", "configmap", "my-map", "--type=merge", `-p={"data":{"foo":"by-hand"}}`)
	rep = runAudit(t, a, f.Env)
	assert.Empty(t, cmp.Diff(map[string]string{"ConfigMap my-map-subdir": recurse + " Modified", "ConfigMap my-map": tla + " Modified"}, byObject(rep)),
		"drift by object (-want +got):\n%s", dump(rep))
	for _, o := range rep.Objects {
		require.Len(t, o.Fields, 1, "%+v", o)
		assert.Equal(t, map[string]string{"my-map-subdir": "from-subdir", "my-map": tla}[o.Name], fmt.Sprint(o.Fields[0].Desired), "Git's value, as Argo CD rendered it")
	}
	assertOutOfSyncAsArgoCDSays(t, rep, map[string]int{recurse: 1, tla: 1})

	// Git deletes the recursed subdirectory's file and changes the other; the sync (prune off)
	// leaves the deleted one, still tracked by the Application.
	f.Git("rm", "-q", "argocd/dirs/hydrator-directory/subdir/config-map-subdir.yaml")
	f.Edit("argocd/dirs/hydrator-directory/config-map.yaml", `"directory-hydrated"`, `"changed"`)
	head = f.Commit("hydrator-directory: the subdirectory's ConfigMap no longer declared")
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", recurse, "argocd.argoproj.io/refresh=normal", "--overwrite")
	require.NoError(t, cluster.WaitSynced(ctx, recurse, head, 4*time.Minute))
	rep = runAudit(t, a, f.Env)
	assert.Empty(t, cmp.Diff(map[string]string{"ConfigMap my-map-subdir": recurse + " Extra", "ConfigMap my-map": tla + " Modified"}, byObject(rep)),
		"drift by object (-want +got):\n%s", dump(rep))
	assertOutOfSyncAsArgoCDSays(t, rep, map[string]int{recurse: 1, tla: 1})
}

// byObject is each object the report names (kind name) with its Application and status.
func byObject(rep *drift.Report) map[string]string {
	out := map[string]string{}
	for _, o := range rep.Objects {
		out[o.Kind+" "+o.Name] = o.Application + " " + o.Status
	}
	return out
}

// assertOutOfSyncAsArgoCDSays: each Application's findings are the resources Argo CD calls
// OutOfSync in its status, once it has compared at least n of them so.
func assertOutOfSyncAsArgoCDSays(t *testing.T, rep *drift.Report, apps map[string]int) {
	t.Helper()
	for app, n := range apps {
		theirs := map[string]bool{}
		waitFor(t, "Argo CD compares "+app+" with the cluster", func() bool {
			theirs = outOfSyncResources(getApp(t, app))
			return len(theirs) >= n
		})
		ours := map[string]bool{}
		for _, o := range rep.Objects {
			if o.Application == app {
				ours[o.Kind+" "+o.Namespace+"/"+o.Name] = true
			}
		}
		assert.Empty(t, cmp.Diff(theirs, ours), "%s's drift (-Argo CD +auditor)", app)
	}
}
