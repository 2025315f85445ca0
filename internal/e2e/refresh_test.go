package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestANewChartVersionReauditsItsApplicationAlone: a root Application (synced by real Argo CD)
// declares the fixture's prod Application, a chart Application at version 0.1.* of a chart
// repository, and a plain directory. A hand edit in the directory stands throughout. The chart
// repository publishes 0.1.2 and Argo CD syncs it: the incremental audit of the Application's
// watch event renders and compares that Application alone, and its report is exactly what a
// full audit of the group says. Then 0.1.3 declares one more object: the Application alone can
// no longer stand beside the group's last audit, and the group is audited in full, again equal
// to a full audit.
func TestANewChartVersionReauditsItsApplicationAlone(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	root, chartApp, dirApp := f.Prefix+"-root-prod", f.Prefix+"-llm-svc", f.Prefix+"-llm-dir"
	ns := f.NS("system")
	rootDir := "apps/" + f.Prefix + "-root"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	chart := func(version string) map[string]string {
		return map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  version: {{ .Chart.Version | quote }}\n"}
	}
	charts := newChartRepo(t, "svc")
	charts.publish(t, "0.1.1", chart("0.1.1"))
	writeYAML(t, f, rootDir+"/svc.yaml", childApp(chartApp, ns, map[string]any{
		"source": map[string]any{"repoURL": charts.url, "chart": "svc", "targetRevision": "0.1.*",
			"helm": map[string]any{"releaseName": f.Prefix + "-svc"}},
	}))
	writeYAML(t, f, rootDir+"/dir.yaml", childApp(dirApp, ns, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "dir"},
	}))
	handEdited := f.Prefix + "-dir-settings"
	require.NoError(t, f.Write("dir/settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+handEdited+"\ndata:\n  mode: strict\n"))
	head := f.Commit("a root over prod, a chart and a directory")
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", chartApp, dirApp, "--ignore-not-found", "--wait=true", "--timeout=2m")
	})
	applyRoot(t, f, root, rootDir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(t, cluster.WaitSynced(ctx, root, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, dirApp, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, chartApp, "0.1.1", 4*time.Minute))
	waitComparedSynced(t, f, root)

	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	require.NoError(t, a.Live.Watch(ctx, nil, []schema.GroupVersionKind{argocd.ApplicationGVK}), "the daemon's cache watches Applications")
	renders := 0
	a.Timing = func(stage string, _ time.Duration) {
		if stage == "render" {
			renders++
		}
	}
	first := runAudit(t, a, f.Env)
	require.True(t, first.InSync, "right after Argo CD's sync:\n%s", dump(first))
	f.Kubectl("-n", ns, "patch", "configmap", handEdited, "--type=merge", `-p={"data":{"mode":"lax"}}`)
	cmRef := drift.Ref{Kind: "ConfigMap", Namespace: ns, Name: handEdited}
	waitFor(t, "the watch has the hand edit", func() bool {
		return watched(a, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, ns, handEdited, "data", "mode") == "lax"
	})
	_, err := a.Update(ctx, f.Env, []drift.Ref{cmRef})
	require.NoError(t, err)

	appRef := drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: testcluster.ArgoCDNamespace, Name: chartApp}
	// newVersion publishes version with files, has Argo CD sync it, waits until the watch has the
	// Application's new synced revision, and re-audits the Application's watch event.
	newVersion := func(version string, files map[string]string) (*drift.Report, int, int64, int64) {
		charts.publish(t, version, files)
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", chartApp, "argocd.argoproj.io/refresh=normal", "--overwrite")
		require.NoError(t, cluster.WaitSynced(ctx, chartApp, version, 4*time.Minute))
		waitFor(t, "the watch has the Application synced to "+version, func() bool { return syncedIn(a, chartApp) == version })
		renders0, full0, alone0 := renders, fullAudits(a), a.AloneAudits()
		got, err := a.Update(ctx, f.Env, []drift.Ref{appRef})
		require.NoError(t, err)
		return got, renders - renders0, fullAudits(a) - full0, a.AloneAudits() - alone0
	}
	// Argo CD's own verdict beside each object is read from its status as of the audit that
	// compared the object: an object no audit since has re-audited keeps the one read then.
	sameVerdicts := cmpopts.IgnoreFields(drift.Object{}, "ArgoCD")
	// fullAudit is a full audit of the group by an auditor of its own, whose secrets are masked alike.
	fullAudit := func() *drift.Report {
		b := newAuditor(t, f)
		b.RootName = a.RootName
		b.Options.SecretKey = a.Options.SecretKey
		return runAudit(t, b, f.Env)
	}
	// drifted is each drifted object of rep with its status and Application.
	drifted := func(rep *drift.Report) map[string]string {
		out := map[string]string{}
		for _, o := range rep.Objects {
			out[o.Kind+" "+o.Name] = o.Status + " of " + o.Application
		}
		return out
	}
	revisionOf := func(rep *drift.Report, name string) string {
		for _, app := range rep.Applications {
			if app.Name == name {
				return app.Revision
			}
		}
		return ""
	}

	got, rendered, full, alone := newVersion("0.1.2", chart("0.1.2"))
	assert.Equal(t, 1, rendered, "the chart Application alone is rendered")
	assert.Zero(t, full, "no full audit of the group")
	assert.Equal(t, int64(1), alone, "the chart Application audited again alone")
	assert.Equal(t, "0.1.2", revisionOf(got, chartApp))
	assert.Equal(t, map[string]string{"ConfigMap " + handEdited: drift.Modified + " of " + dirApp}, drifted(got), "the hand edit stands:\n%s", dump(got))
	if diff := cmp.Diff(fullAudit(), got, sameVerdicts); diff != "" {
		t.Fatalf("the Application audited alone differs from a full audit (-full +alone):\n%s", diff)
	}

	more := chart("0.1.3")
	more["templates/limits.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-limits\ndata:\n  max: \"10\"\n"
	got, rendered, full, alone = newVersion("0.1.3", more)
	assert.Equal(t, int64(1), full, "one more object declared: the group is audited in full")
	assert.Zero(t, alone)
	assert.Equal(t, 5, rendered, "the chart Application alone (which declares more), then the root, prod, the chart and the directory")
	assert.Equal(t, "0.1.3", revisionOf(got, chartApp))
	assert.Equal(t, map[string]string{"ConfigMap " + handEdited: drift.Modified + " of " + dirApp}, drifted(got), "the hand edit stands:\n%s", dump(got))
	if diff := cmp.Diff(fullAudit(), got, sameVerdicts); diff != "" {
		t.Fatalf("the group's audit differs from a full audit (-full +update):\n%s", diff)
	}

	// A refresh asked of Argo CD (`argocd app get --refresh`) moves nothing: its Application's
	// event renders nothing and audits no Application again.
	reconciled := watched(a, argocd.ApplicationGVK, testcluster.ArgoCDNamespace, chartApp, "status", "reconciledAt")
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", chartApp, "argocd.argoproj.io/refresh=normal", "--overwrite")
	waitFor(t, "the watch has Argo CD's refresh", func() bool {
		return watched(a, argocd.ApplicationGVK, testcluster.ArgoCDNamespace, chartApp, "status", "reconciledAt") != reconciled &&
			watched(a, argocd.ApplicationGVK, testcluster.ArgoCDNamespace, chartApp, "metadata", "annotations", "argocd.argoproj.io/refresh") == ""
	})
	renders0, full0, alone0 := renders, fullAudits(a), a.AloneAudits()
	got, err = a.Update(ctx, f.Env, []drift.Ref{appRef})
	require.NoError(t, err)
	assert.Equal(t, []any{0, int64(0), int64(0)}, []any{renders - renders0, fullAudits(a) - full0, a.AloneAudits() - alone0},
		"renders, full audits, Applications audited alone after a refresh")
	assert.Equal(t, "0.1.3", revisionOf(got, chartApp))
	if diff := cmp.Diff(fullAudit(), got, sameVerdicts); diff != "" {
		t.Fatalf("after a refresh, the report differs from a full audit (-full +update):\n%s", diff)
	}

	// By hand, an exemption added to the chart Application: its live spec is no longer Git's, so
	// it is not audited alone (a spec the root synced from a commit not rendered yet looks the
	// same), and the root reports the Application Modified.
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "patch", "application", chartApp, "--type=merge",
		`-p={"spec":{"ignoreDifferences":[{"kind":"ConfigMap","jsonPointers":["/data/version"]}]}}`)
	waitFor(t, "the watch has the exemption", func() bool {
		u, ok := a.Live.Get(argocd.ApplicationGVK, testcluster.ArgoCDNamespace, chartApp)
		if !ok {
			return false
		}
		ignores, _, _ := unstructured.NestedSlice(u.Object, "spec", "ignoreDifferences")
		return len(ignores) == 1
	})
	full0, alone0 = fullAudits(a), a.AloneAudits()
	got, err = a.Update(ctx, f.Env, []drift.Ref{appRef})
	require.NoError(t, err)
	assert.Equal(t, int64(1), fullAudits(a)-full0, "a hand-edited Application: the group is audited in full")
	assert.Equal(t, alone0, a.AloneAudits())
	assert.Equal(t, map[string]string{"ConfigMap " + handEdited: drift.Modified + " of " + dirApp, "Application " + chartApp: drift.Modified + " of " + root},
		drifted(got), "%s", dump(got))
	if diff := cmp.Diff(fullAudit(), got, sameVerdicts); diff != "" {
		t.Fatalf("the group's audit differs from a full audit (-full +update):\n%s", diff)
	}
}

// watched is the string at fields of the object a's live cache has ("" without one).
func watched(a *audit.Auditor, gvk schema.GroupVersionKind, ns, name string, fields ...string) string {
	u, ok := a.Live.Get(gvk, ns, name)
	if !ok {
		return ""
	}
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

// syncedIn is the revision the Application name (in Argo CD's namespace) was synced to, as the
// auditor reads it from a's live cache: its newest history entry ("" without one).
func syncedIn(a *audit.Auditor, name string) string {
	u, ok := a.Live.Get(argocd.ApplicationGVK, testcluster.ArgoCDNamespace, name)
	if !ok {
		return ""
	}
	app, err := argocd.FromUnstructured(u)
	if err != nil {
		return ""
	}
	return app.SyncedRevision
}

// fullAudits is how many full audits a has run.
func fullAudits(a *audit.Auditor) int64 {
	full, _ := a.Counts()
	return full
}

// TestARootAuditedElsewhereThatSyncsANewChildIsFollowed: sharded (leaderElection.shard), this
// replica holds only a second cluster. The root, on Argo CD's own cluster, is another replica's;
// this one renders it for the Applications it declares, and audits the one on its cluster. The
// root tracks a release branch; its children track main. A commit on the release branch adds a
// second child on that cluster, and Argo CD syncs the root: main does not move, yet the root's
// new synced revision has the group audited in full, and the new child is audited here.
func TestARootAuditedElsewhereThatSyncsANewChildIsFollowed(t *testing.T) {
	testcluster.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := platform(t)
	member, err := cluster.AddCluster(ctx, f.Prefix+"-far")
	require.NoError(t, err)
	root, rootDir := f.Prefix+"-root-prod", "apps/"+f.Prefix+"-root"
	child := func(name string) map[string]any {
		app := childApp(name, name, map[string]any{
			"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "far/" + name},
		})
		delete(app["metadata"].(map[string]any), "finalizers") // the cluster goes with the test
		spec := app["spec"].(map[string]any)
		spec["destination"] = map[string]any{"server": member.URL, "namespace": name}
		spec["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": true, "selfHeal": false},
			"syncOptions": []any{"ServerSideApply=true", "CreateNamespace=true"}}
		require.NoError(t, f.Write("far/"+name+"/settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  model: qwen\n"))
		return app
	}
	first, second := f.Prefix+"-far-1", f.Prefix+"-far-2"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	writeYAML(t, f, rootDir+"/far-1.yaml", child(first))
	require.NoError(t, f.Write("far/"+second+"/settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  model: llama\n"))
	head := f.Commit("a root over prod and an Application on the far cluster")
	f.Git("branch", "release")
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", first, second, "--ignore-not-found", "--wait=false")
	})
	rootApp := childApp(root, testcluster.ArgoCDNamespace, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "release", "path": rootDir},
	})
	delete(rootApp["metadata"].(map[string]any), "finalizers")
	applyObject(t, f, rootApp)
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", root, "--ignore-not-found", "--wait=false")
	})
	for _, app := range []string{root, first} {
		require.NoError(t, cluster.WaitSynced(ctx, app, head, 4*time.Minute), app)
	}

	fl, err := fleet.New(ctx, []fleet.Cluster{{Name: member.Name, Server: member.URL, Kubeconfig: member.ReaderKubeconfig}})
	require.NoError(t, err)
	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	a.Clusters, a.ClusterName = fl.Resolve, fl.Name
	a.Owns = func(c string) bool { return c == member.Name }
	require.NoError(t, a.Live.Watch(ctx, nil, []schema.GroupVersionKind{argocd.ApplicationGVK}), "the daemon's cache watches Applications")
	audited := func(rep *drift.Report) []string {
		var out []string
		for _, e := range rep.Applications {
			assert.Empty(t, e.Error, e.Name)
			out = append(out, e.Name+" on "+e.Cluster)
		}
		return out
	}
	rep := runAudit(t, a, f.Env)
	assert.Equal(t, []string{first + " on " + member.Name}, audited(rep), "this replica's cluster only")
	require.True(t, rep.InSync, "right after Argo CD's sync:\n%s", dump(rep))

	// The second child, committed on the release branch alone: main, which the children track,
	// stays where it was.
	f.Git("checkout", "-q", "release")
	writeYAML(t, f, rootDir+"/far-2.yaml", child(second))
	release := f.Commit("a second Application on the far cluster")
	f.Git("checkout", "-q", "main")
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", root, "argocd.argoproj.io/refresh=normal", "--overwrite")
	require.NoError(t, cluster.WaitSynced(ctx, root, release, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, second, head, 4*time.Minute))
	rootRef := drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: testcluster.ArgoCDNamespace, Name: root}
	waitFor(t, "the watch has the root synced at the release commit", func() bool { return syncedIn(a, root) == release })
	full0 := fullAudits(a)
	rep, err = a.Update(ctx, f.Env, []drift.Ref{rootRef})
	require.NoError(t, err)
	assert.Equal(t, int64(1), fullAudits(a)-full0, "the root's new synced revision: the group is audited in full")
	assert.Equal(t, []string{first + " on " + member.Name, second + " on " + member.Name}, audited(rep), "the new child is audited here")
	assert.True(t, rep.InSync, "%s", dump(rep))
}
