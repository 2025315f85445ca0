package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// TestApplicationSetsAndTheSelectionJoinTheGroup: a root Application declares the fixture's prod
// Application and an ApplicationSet (a list generator of two elements). Argo CD's real
// ApplicationSet controller makes the two Applications, and its application controller syncs
// them. A third Application is made by hand, outside Git, with a team label. The env's group
// takes the generated Applications (via their ApplicationSet) always. Without a selection the
// hand-made Application is Extra (made by hand in Argo CD's namespace); a selection that picks it
// makes it a member. Each member is in sync right after the sync, and a hand edit to an object of
// each is drift of that Application.
func TestApplicationSetsAndTheSelectionJoinTheGroup(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	root, set, picked := f.Prefix+"-root-prod", f.Prefix+"-gen", f.Prefix+"-picked"
	genA, genB := set+"-a", set+"-b"
	ns := f.NS("system")
	rootDir := "apps/" + f.Prefix + "-root"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	template := childApp(set+"-{{name}}", ns, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "gen/{{name}}"},
	})
	writeYAML(t, f, rootDir+"/set.yaml", map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
		"metadata": map[string]any{"name": set, "namespace": testcluster.ArgoCDNamespace},
		"spec": map[string]any{
			"generators": []any{map[string]any{"list": map[string]any{"elements": []any{
				map[string]any{"name": "a"}, map[string]any{"name": "b"},
			}}}},
			"template": map[string]any{"metadata": template["metadata"], "spec": template["spec"]},
			// The controller creates the Applications and never updates them: a hand edit of one
			// stands, and only the audit sees it. Git exempts b's revision.
			"syncPolicy":                   map[string]any{"applicationsSync": "create-only"},
			"ignoreApplicationDifferences": []any{map[string]any{"name": genB, "jsonPointers": []any{"/spec/source/targetRevision"}}},
		},
	})
	for _, name := range []string{"a", "b"} {
		require.NoError(t, f.Write("gen/"+name+"/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+set+"-"+name+"\ndata:\n  size: small\n"))
	}
	require.NoError(t, f.Write("picked/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+picked+"\ndata:\n  owner: team\n"))
	head := f.Commit("a root with an ApplicationSet; a directory for a hand-made Application")
	hand := childApp(picked, ns, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "picked"},
	})
	hand["metadata"].(map[string]any)["labels"] = map[string]any{"team": f.Prefix}
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "applicationset", set, "--ignore-not-found", "--wait=true", "--timeout=2m")
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", genA, genB, picked, "--ignore-not-found", "--wait=true", "--timeout=2m")
	})
	applyRoot(t, f, root, rootDir)
	applyObject(t, f, hand)
	ctx := context.Background()
	for _, app := range []string{root, genA, genB, picked} { // prod's own stays at its revision: the commit changes nothing of it
		require.NoError(t, cluster.WaitSynced(ctx, app, head, 4*time.Minute), app)
	}

	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	rep := runAudit(t, a, f.Env)
	assert.Equal(t, map[string]string{root: "", f.App(): "", genA: "ApplicationSet " + set, genB: "ApplicationSet " + set},
		applicationsVia(t, rep), "without a selection: the root's tree and what its ApplicationSet generated")
	var extra []string
	for _, o := range rep.Objects {
		extra = append(extra, o.Kind+" "+o.Name+" "+o.Status+" of "+o.Application)
	}
	assert.Equal(t, []string{"Application " + picked + " Extra of " + root}, extra,
		"right after Argo CD's sync, only the Application made by hand in Argo CD's namespace:\n%s", dump(rep))

	// A group past the bound: the first Applications audited, each one more listed with the
	// reason, the env's audit not failed.
	bounded := newAuditor(t, f)
	bounded.RootName, bounded.MaxApplications = a.RootName, 3
	rep = runAudit(t, bounded, f.Env)
	var audited, beyond []string
	for _, app := range rep.Applications {
		if strings.Contains(app.Error, "not audited: the group has more than 3 Applications") {
			beyond = append(beyond, app.Name)
			continue
		}
		assert.Empty(t, app.Error, app.Name)
		audited = append(audited, app.Name)
	}
	assert.Len(t, audited, 3, "audited: %v", audited)
	assert.Len(t, beyond, 1, "past the bound: %v", beyond)
	assert.Subset(t, audited, []string{root, f.App()}, "the root and the env's own Application are audited first")

	sel, err := labels.Parse("team=" + f.Prefix)
	require.NoError(t, err)
	a.Select = func(string) *audit.AppSelection {
		return &audit.AppSelection{Namespaces: []string{testcluster.ArgoCDNamespace}, Selector: sel}
	}
	full0, _ := a.Counts()
	rep = runAudit(t, a, f.Env)
	full1, _ := a.Counts()
	assert.Equal(t, int64(1), full1-full0, "one full audit of the group, whatever its number of Applications (auditor_audits_total)")
	assert.Equal(t, map[string]string{root: "", f.App(): "", genA: "ApplicationSet " + set, genB: "ApplicationSet " + set, picked: "selection"},
		applicationsVia(t, rep), "with a selection: the Application it picks too")
	assert.True(t, rep.InSync, "right after Argo CD's sync:\n%s", dump(rep))
	for _, app := range rep.Applications {
		if app.Via != "" {
			assert.Equal(t, 1, app.Objects, "%s: its one ConfigMap", app.Name)
			assert.Equal(t, head, app.Revision, app.Name)
		}
	}

	// An Application the selection picks, made after the last full audit: the daemon's
	// incremental audit of its watch event takes it in (a full audit), never as Extra.
	late := f.Prefix + "-late"
	lateApp := childApp(late, ns, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "picked"},
	})
	lateApp["metadata"].(map[string]any)["labels"] = map[string]any{"team": f.Prefix}
	delete(lateApp["metadata"].(map[string]any), "finalizers")
	delete(lateApp["spec"].(map[string]any), "syncPolicy") // not synced: its objects are picked's
	applyObject(t, f, lateApp)
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", late, "--ignore-not-found", "--wait=false")
	})
	uctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rep, err = a.Update(uctx, f.Env, []drift.Ref{{Group: "argoproj.io", Kind: "Application", Namespace: testcluster.ArgoCDNamespace, Name: late}})
	require.NoError(t, err)
	assert.Equal(t, "selection", applicationsVia(t, rep)[late], "the new Application joined: %+v", rep.Applications)
	for _, o := range rep.Objects {
		assert.NotEqual(t, late, o.Name, "never Extra: %+v", o)
	}
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", late, "--wait=true", "--timeout=1m")
	rep = runAudit(t, a, f.Env)
	assert.NotContains(t, applicationsVia(t, rep), late)

	f.Kubectl("-n", ns, "patch", "configmap", genA, "--type=merge", `-p={"data":{"size":"large"}}`)
	f.Kubectl("-n", ns, "patch", "configmap", picked, "--type=merge", `-p={"data":{"owner":"someone-else"}}`)
	rep = runAudit(t, a, f.Env)
	got := map[string]string{}
	for _, o := range rep.Objects {
		got[o.Kind+" "+o.Name] = o.Application + " " + o.Status
		if o.Name == genA {
			assert.True(t, hasPath(o, ".data.size"), "%+v", o.Fields)
			assert.Equal(t, "gen/a", o.Source, "what its Application renders, where an adopt patch goes")
		}
		if o.Name == picked {
			assert.True(t, hasPath(o, ".data.owner"), "%+v", o.Fields)
		}
	}
	assert.Equal(t, map[string]string{"ConfigMap " + genA: genA + " Modified", "ConfigMap " + picked: picked + " Modified"}, got)

	// Hand edits of the generated Applications themselves: a's prune turned off is drift of the
	// root, which syncs the ApplicationSet; b's revision is exempt by the set's
	// ignoreApplicationDifferences, which Git declares.
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "patch", "application", genA, "--type=merge", `-p={"spec":{"syncPolicy":{"automated":{"prune":false}}}}`)
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "patch", "application", genB, "--type=merge", `-p={"spec":{"source":{"targetRevision":"HEAD"}}}`)
	rep = runAudit(t, a, f.Env)
	var apps []string
	for _, o := range rep.Objects {
		if o.Kind != "Application" {
			continue
		}
		apps = append(apps, o.Name+" "+o.Status+" of "+o.Application)
		if o.Name == genA {
			assert.True(t, hasPath(o, ".spec.syncPolicy.automated.prune"), "%+v", o.Fields)
			assert.Contains(t, o.Note, "prune turned off on "+genA)
		}
	}
	assert.Equal(t, []string{genA + " Modified of " + root}, apps, "%s", dump(rep))

	// Git moves the set to the sync policy and adds a label to its template: the controller
	// updates both Applications (a's prune back, the label on both) and leaves b's revision,
	// which the set exempts. Nothing is drift then.
	f.Edit(rootDir+"/set.yaml", "applicationsSync: create-only", "applicationsSync: sync")
	f.Edit(rootDir+"/set.yaml", "  template:\n    metadata:\n", "  template:\n    metadata:\n      labels:\n        tier: gen\n")
	head = f.Commit("the set syncs its Applications, labelled")
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", root, "argocd.argoproj.io/refresh=normal", "--overwrite")
	require.NoError(t, cluster.WaitSynced(ctx, root, head, 4*time.Minute))
	require.Eventually(t, func() bool {
		return f.Kubectl("-n", testcluster.ArgoCDNamespace, "get", "application", genA, genB, "-o", "jsonpath={.items[*].metadata.labels.tier}") == "gen gen"
	}, 2*time.Minute, 500*time.Millisecond, "the set's controller never updated its Applications")
	rep = runAudit(t, a, f.Env)
	got = map[string]string{}
	for _, o := range rep.Objects {
		got[o.Kind+" "+o.Name] = o.Application + " " + o.Status
	}
	assert.Equal(t, map[string]string{"ConfigMap " + genA: genA + " Modified", "ConfigMap " + picked: picked + " Modified"}, got,
		"after the set's controller updated its Applications, only the earlier ConfigMap edits stand (selfHeal off):\n%s", dump(rep))
}

// applicationsVia maps each Application of rep to how it joined the group; an Application that
// could not be audited fails the test.
func applicationsVia(t *testing.T, rep *drift.Report) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, app := range rep.Applications {
		assert.Empty(t, app.Error, app.Name)
		out[app.Name] = app.Via
	}
	return out
}

// applyObject applies obj with kubectl (server-side), as a person applies a file.
func applyObject(t *testing.T, f *testfixture.Platform, obj map[string]any) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "object.yaml")
	data, err := yaml.Marshal(obj)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, data, 0o644))
	f.Kubectl("apply", "--server-side", "-f", file)
}
