package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestAdoptHandScaledHelmDeploymentIntoValuesObject: a root Application (synced by real Argo
// CD) declares an Application of Argo CD's own e2e chart helm-guestbook, whose Deployment's
// replicas are .Values.replicas. The Deployment is scaled by hand; the audit reports it, with
// the root's path as where its Application is declared. The adopt patch writes replicas into
// the Application's valuesObject; `git apply` takes it, the chart rendered from the patched tree
// gives the live count, and once committed, Argo CD compares the Deployment Synced without
// syncing it, and the audit finds no drift.
func TestAdoptHandScaledHelmDeploymentIntoValuesObject(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	root, app := f.Prefix+"-root-prod", f.Prefix+"-guestbook"
	ns := f.NS("system")
	rootDir := "apps/" + f.Prefix + "-root"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	writeYAML(t, f, rootDir+"/guestbook.yaml", childApp(app, ns, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "charts/guestbook",
			"helm": map[string]any{"releaseName": app}},
	}))
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v3").Output()
	require.NoError(t, err)
	chart := filepath.Join(strings.TrimSpace(string(out)), "test/e2e/testdata/helm-guestbook")
	require.NoError(t, filepath.Walk(chart, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(chart, p)
		if err == nil {
			err = f.Write(filepath.Join("charts/guestbook", rel), string(data))
		}
		return err
	}))
	head := f.Commit("a root over prod and Argo CD's guestbook chart")
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", app, "--ignore-not-found", "--wait=true", "--timeout=2m")
	})
	applyRoot(t, f, root, rootDir)
	ctx := context.Background()
	require.NoError(t, cluster.WaitSynced(ctx, root, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, app, head, 4*time.Minute))
	waitComparedSynced(t, f, root)

	f.Kubectl("-n", ns, "scale", "deployment", "guestbook-ui", "--replicas=3")
	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	rep := runAudit(t, a, f.Env)
	var scaled *drift.Object
	for i, o := range rep.Objects {
		if o.Kind == "Deployment" && o.Name == "guestbook-ui" {
			scaled = &rep.Objects[i]
		}
	}
	require.NotNil(t, scaled, "the hand-scaled Deployment is drift:\n%s", dump(rep))
	assert.Equal(t, "Helm chart charts/guestbook", scaled.Source)
	assert.Equal(t, rootDir, scaled.AppSource, "where its Application is declared")

	repo, err := gitrepo.Open(f.Dir)
	require.NoError(t, err)
	adoption, err := adopt.GroupIn(rep.Env, rep.Revision, adopt.Repo{ReadAt: repo.ReadFile, Tree: repo.Snapshot}, *scaled)
	require.NoError(t, err)
	var notes []string
	if scaled.Revision != rep.Revision { // the env's own Application is pinned; the root follows main
		notes = []string{"the change of " + rootDir + "/guestbook.yaml is written against " + scaled.Revision[:12] + ", the revision its Application syncs"}
	}
	assert.Equal(t, notes, adoption.Notes)
	assert.Equal(t, 1, adoption.Fields)
	assert.Contains(t, adoption.Diff, "+++ b/"+rootDir+"/guestbook.yaml")
	assert.Regexp(t, `\n\+ +valuesObject:\n\+ +replicas: 3\n`, adoption.Diff)
	patch := filepath.Join(t.TempDir(), "adopt.diff")
	require.NoError(t, os.WriteFile(patch, []byte(adoption.Diff), 0o644))
	f.Git("apply", "--check", patch)
	f.Git("apply", patch)

	// The chart rendered from the patched tree, with the patched Application's options.
	data, err := os.ReadFile(filepath.Join(f.Dir, rootDir, "guestbook.yaml"))
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &u.Object))
	patched, err := argocd.FromUnstructured(u)
	require.NoError(t, err)
	src, err := render.FromDir(f.Dir)
	require.NoError(t, err)
	res, err := render.Engine{}.Render(ctx, src, render.Target{Name: render.AppTarget("charts/guestbook"),
		Variant: render.Variant{Helm: patched.HelmOptions("", argocd.Cluster{})}})
	require.NoError(t, err)
	var replicas any
	for _, o := range res.Objects {
		if o.GetKind() == "Deployment" && o.GetName() == "guestbook-ui" {
			replicas, _, _ = unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
		}
	}
	assert.EqualValues(t, 3, replicas, "the re-rendered replicas are the live ones")

	adopted := f.Commit("adopt the hand-scaled guestbook")
	// As `argocd app get --refresh`, Argo CD is asked to compare now. The root syncs the new
	// valuesObject; the guestbook needs no sync: Argo CD compares it Synced at the commit.
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", root, "argocd.argoproj.io/refresh=normal", "--overwrite")
	require.NoError(t, cluster.WaitSynced(ctx, root, adopted, 4*time.Minute))
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", app, "argocd.argoproj.io/refresh=normal", "--overwrite")
	waitFor(t, "Argo CD compares the guestbook Synced at the adopting commit", func() bool {
		st := getApp(t, app)
		rev, _, _ := unstructured.NestedString(st.Object, "status", "sync", "revision")
		status, _, _ := unstructured.NestedString(st.Object, "status", "sync", "status")
		return rev == adopted && status == "Synced"
	})
	rep = runAudit(t, a, f.Env)
	for _, o := range rep.Objects {
		assert.False(t, o.Kind == "Deployment" && o.Name == "guestbook-ui", "adopted and synced, the Deployment is Git's:\n%s", dump(rep))
	}
}
