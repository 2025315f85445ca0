package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestApplicationOutsideArgoCDsNamespace syncs, with real Argo CD (apps in any namespace), an
// Application that lives in a namespace of its own, declared by the env's root. The report names
// it namespace/name, as Argo CD's CLI does. Argo CD tracks its objects as namespace_name: an
// object Git stops declaring, left by a sync without prune, is reported Extra of that
// Application (before, the tracking id did not match and it went unseen).
func TestApplicationOutsideArgoCDsNamespace(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	appsNS := f.Prefix + "-apps"
	root, tenant, project := f.Prefix+"-root-prod", f.Prefix+"-tenant", f.Prefix+"-tenant"
	dest := f.NS("system")
	f.Kubectl("create", "namespace", appsNS)
	t.Cleanup(func() { f.Kubectl("delete", "namespace", appsNS, "--ignore-not-found", "--wait=false") })

	rootDir := "apps/" + f.Prefix + "-root"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	// The tenant's project, made by hand like the fixture's (the root declares no AppProject).
	applyObject(t, f, map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": project, "namespace": testcluster.ArgoCDNamespace},
		"spec": map[string]any{
			"sourceRepos":      []any{"*"},
			"sourceNamespaces": []any{appsNS},
			"destinations":     []any{map[string]any{"server": "https://kubernetes.default.svc", "namespace": dest}},
		},
	})
	app := childApp(tenant, dest, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "tenant"},
	})
	app["metadata"].(map[string]any)["namespace"] = appsNS
	app["spec"].(map[string]any)["project"] = project
	app["spec"].(map[string]any)["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": false, "selfHeal": false},
		"syncOptions": []any{"ServerSideApply=true"}}
	writeYAML(t, f, rootDir+"/tenant.yaml", app)
	for _, name := range []string{"a", "b"} {
		require.NoError(t, f.Write("tenant/"+name+".yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+f.Prefix+"-tenant-"+name+"\ndata:\n  k: v\n"))
	}
	head := f.Commit("a root declaring an Application in a namespace of its own")
	t.Cleanup(func() {
		f.Kubectl("-n", appsNS, "delete", "application", tenant, "--ignore-not-found", "--wait=true", "--timeout=2m")
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "appproject", project, "--ignore-not-found")
	})
	applyRoot(t, f, root, rootDir)
	ctx := context.Background()
	for _, a := range []string{root, appsNS + "/" + tenant} {
		require.NoError(t, cluster.WaitSynced(ctx, a, head, 4*time.Minute), a)
	}
	waitComparedSynced(t, f, root)

	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	rep := runAudit(t, a, f.Env)
	var entry string
	for _, app := range rep.Applications {
		assert.Empty(t, app.Error, app.Name)
		if app.Namespace == appsNS {
			entry = app.Name
		}
	}
	assert.Equal(t, appsNS+"/"+tenant, entry, "named as Argo CD's CLI names it: %+v", rep.Applications)
	assert.True(t, rep.InSync, "right after Argo CD's sync:\n%s", dump(rep))

	// Git stops declaring b and changes a; the sync (prune off) leaves b, tracked as
	// appsNS_tenant. (A commit that only drops an object starts no automated sync with prune
	// off: Argo CD waits for a person.)
	f.Git("rm", "-q", "tenant/b.yaml")
	require.NoError(t, f.Write("tenant/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+f.Prefix+"-tenant-a\ndata:\n  k: w\n"))
	head = f.Commit("tenant: b no longer declared, a changed")
	// Only the tenant's manifests changed: the root has nothing to sync. Argo CD is asked to
	// compare now, as `argocd app get --refresh` does.
	f.Kubectl("-n", appsNS, "annotate", "application", tenant, "argocd.argoproj.io/refresh=normal", "--overwrite")
	require.NoError(t, cluster.WaitSynced(ctx, appsNS+"/"+tenant, head, 4*time.Minute))
	rep = runAudit(t, a, f.Env)
	var got []string
	for _, o := range rep.Objects {
		got = append(got, o.Kind+" "+o.Name+" "+o.Status+" of "+o.Application)
		if o.Name == f.Prefix+"-tenant-b" {
			assert.Contains(t, o.Note, "Argo CD's tracking annotation names this Application")
		}
	}
	assert.Equal(t, []string{"ConfigMap " + f.Prefix + "-tenant-b Extra of " + appsNS + "/" + tenant}, got, "%s", dump(rep))
}
