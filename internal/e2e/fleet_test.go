package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/llm-gitops/platform/internal/daemon"
	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestApplicationOnAnotherCluster: the env's root declares, besides the env's own Application,
// one whose destination is a second cluster (its own etcd and kube-apiserver, registered in Argo
// CD as a cluster Secret). Real Argo CD syncs it there. The auditor reads that cluster with its
// own read-only kubeconfig (never Argo CD's Secret). A hand edit there (alice, kubectl patch) is
// reported on that cluster, with the person, as Argo CD's status flags the object. With that
// API server stopped, the Application is not audited ("unreachable") while the env's own still
// is; started again, it is audited again.
func TestApplicationOnAnotherCluster(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	f := platform(t)
	member, err := cluster.AddCluster(ctx, f.Prefix+"-edge")
	require.NoError(t, err)
	root, edge, dest := f.Prefix+"-root-prod", f.Prefix+"-edge", f.Prefix+"-edge-ns"

	rootDir := "apps/" + f.Prefix + "-root"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	app := childApp(edge, dest, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "edge"},
	})
	delete(app["metadata"].(map[string]any), "finalizers") // the edge cluster goes with the test
	spec := app["spec"].(map[string]any)
	spec["destination"] = map[string]any{"server": member.URL, "namespace": dest}
	spec["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": true, "selfHeal": false},
		"syncOptions": []any{"ServerSideApply=true", "CreateNamespace=true"}}
	writeYAML(t, f, rootDir+"/edge.yaml", app)
	require.NoError(t, f.Write("edge/settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: edge-settings\ndata:\n  replicas: \"2\"\n  model: qwen\n"))
	head := f.Commit("a root declaring an Application on the edge cluster")
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", edge, "--ignore-not-found", "--wait=true", "--timeout=2m")
	})
	applyRoot(t, f, root, rootDir)
	for _, a := range []string{root, edge} {
		require.NoError(t, cluster.WaitSynced(ctx, a, head, 4*time.Minute), a)
	}
	waitComparedSynced(t, f, root)

	fl, err := fleet.New(ctx, []fleet.Cluster{{Name: member.Name, Server: member.URL, Kubeconfig: member.ReaderKubeconfig}})
	require.NoError(t, err)
	// Credentials the cluster no longer takes make it unreachable, though it answers /version.
	data, err := os.ReadFile(member.ReaderKubeconfig)
	require.NoError(t, err)
	revoked := filepath.Join(t.TempDir(), "revoked")
	require.NoError(t, os.WriteFile(revoked, []byte(strings.ReplaceAll(string(data), testcluster.ReaderToken, "revoked-token")), 0o600))
	bad, err := fleet.New(ctx, []fleet.Cluster{{Name: member.Name, Server: member.URL, Kubeconfig: revoked}})
	require.NoError(t, err)
	_, _, err = bad.Resolve(ctx, member.URL, "")
	var down *fleet.UnreachableError
	assert.ErrorAs(t, err, &down)
	assert.True(t, apierrors.IsUnauthorized(err), "the API server refused the token: %v", err)
	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	a.Clusters = fl.Resolve
	rep := runAudit(t, a, f.Env)
	clusters := map[string]string{}
	for _, e := range rep.Applications {
		assert.Empty(t, e.Error, e.Name)
		clusters[e.Name] = e.Cluster
	}
	assert.Equal(t, map[string]string{root: "", f.App(): "", edge: member.Name}, clusters, "each Application names its cluster")
	assert.True(t, rep.InSync, "right after Argo CD's sync:\n%s", dump(rep))

	// alice edits the ConfigMap on the edge cluster by hand.
	kubectl := func(args ...string) {
		t.Helper()
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", member.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl %v: %s", args, out)
	}
	kubectl("--context", "alice", "-n", dest, "patch", "configmap", "edge-settings", "-p", `{"data":{"replicas":"5"}}`)
	var got []string
	var edited *drift.Object
	deadline := time.Now().Add(30 * time.Second)
	for {
		people := auditlog.NewStore(0)
		for _, log := range []auditlog.File{{Path: cluster.AuditLog}, {Path: member.AuditLog, Cluster: member.Name}} { // both clusters' audit events
			require.NoError(t, log.Load(ctx, people))
		}
		a.People = people
		rep = runAudit(t, a, f.Env)
		got, edited = nil, nil
		for i, o := range rep.Objects {
			got = append(got, o.Kind+" "+o.Namespace+"/"+o.Name+" on "+o.Cluster+" of "+o.Application)
			if o.Name == "edge-settings" {
				edited = &rep.Objects[i]
			}
		}
		if edited != nil && len(edited.Fields) > 0 && edited.Fields[0].Actor != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // the API server writes its audit log in batches
	}
	assert.Equal(t, []string{"ConfigMap " + dest + "/edge-settings on " + member.Name + " of " + edge}, got, "%s", dump(rep))
	require.NotNil(t, edited)
	require.Len(t, edited.Fields, 1, "%s", dump(rep))
	fd := edited.Fields[0]
	assert.Equal(t, ".data.replicas", fd.Path)
	assert.Equal(t, []any{"2", "5"}, []any{fd.Desired, fd.Live})
	assert.Equal(t, "kubectl-patch", fd.Manager)
	if assert.NotNil(t, fd.Actor, "the person, from the edge cluster's audit log") {
		assert.Equal(t, "alice", fd.Actor.User)
	}

	// Argo CD's own status of the edge Application agrees, once it compares again.
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "annotate", "application", edge, "argocd.argoproj.io/refresh=normal", "--overwrite")
	require.Eventually(t, func() bool {
		out := f.Kubectl("-n", testcluster.ArgoCDNamespace, "get", "application", edge, "-o", "jsonpath={.status.sync.status}")
		return out == "OutOfSync"
	}, 2*time.Minute, time.Second, "Argo CD never saw the edit on the edge cluster")

	// The daemon, configured with the edge cluster, posts the edit with the cluster and person.
	c := newChat(t)
	d := startDaemon(t, f, c, "rootNamePrefix: "+f.Prefix+"-root-", "clusters:",
		"  - {name: "+member.Name+", server: '"+member.URL+"', kubeconfig: "+member.ReaderKubeconfig+", auditLog: "+member.AuditLog+"}",
		"auditEvents: {file: "+cluster.AuditLog+"}")
	c.wait(t, "message about the edge edit", func(m string) bool {
		return strings.Contains(m, "edge-settings on cluster "+member.Name) && strings.Contains(m, "alice")
	})
	// A second edit there reaches chat through the edge cluster's watch.
	kubectl("--context", "bob", "-n", dest, "patch", "configmap", "edge-settings", "-p", `{"data":{"model":"llama"}}`)
	c.wait(t, "message about the second edge edit", func(m string) bool {
		return strings.Contains(m, "edge-settings on cluster "+member.Name) && strings.Contains(m, ".data.model") && strings.Contains(m, "bob")
	})
	// Blame of the object on the edge cluster: walked in its Application (under a root of the
	// test's own, at the revision that Application synced); the live object, its drift and the
	// people's writes are the edge cluster's. No Application on Argo CD's own cluster declares it.
	b := blameOf(t, d, url.Values{"env": {"prod"}, "kind": {"configmap"}, "namespace": {dest}, "name": {"edge-settings"}, "cluster": {member.Name}})
	assert.Equal(t, member.Name, b.Cluster)
	require.NotNil(t, b.Live)
	assert.True(t, b.Live.Found, "the edge cluster's object was not found: %+v", b.Notes)
	drifted, writers := map[string]bool{}, map[string]bool{}
	for _, fd := range b.Fields {
		if len(fd.Drift) > 0 {
			drifted[fd.Path] = true
		}
	}
	for _, w := range b.Writes {
		writers[w.User] = true
	}
	assert.Equal(t, map[string]bool{".data.model": true, ".data.replicas": true}, drifted)
	assert.True(t, writers["alice"] && writers["bob"], "writes on the edge cluster: %v", writers)
	assert.Equal(t, edge, b.Application)
	resp, err := http.Get("http://" + d.Addr() + "/api/v1/blame?" + url.Values{"env": {"prod"}, "kind": {"configmap"}, "namespace": {dest}, "name": {"edge-settings"}}.Encode())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "declared on Argo CD's own cluster")

	// The edge cluster's API server stops: its Application is not audited (one message), the
	// env's own is, and what the edge's last audit found stands (nothing is called resolved).
	require.NoError(t, member.StopAPIServer())
	errs := map[string]string{}
	require.Eventually(t, func() bool { // one failed probe is a blip: the second says unreachable
		rep = runAudit(t, a, f.Env)
		for _, e := range rep.Applications {
			errs[e.Name] = e.Error
		}
		// The first audit after the stop may fail on the wire before the fleet's second probe
		// agrees: both say unreachable, and the status follows.
		return strings.Contains(errs[edge], "cluster "+member.Name+" unreachable") && len(fl.Status()) == 1 && !fl.Status()[0].Reachable
	}, 30*time.Second, time.Second, "the edge Application was never said unreachable: %+v", rep.Applications)
	assert.Empty(t, errs[f.App()], "the env's own Application is audited on")
	assert.Equal(t, []fleet.Status{{Name: member.Name, Server: member.URL, Reachable: false}}, withoutDetail(fl.Status()))
	var stale []string
	for _, o := range rep.Objects {
		if o.Cluster == member.Name {
			stale = append(stale, o.Name+": "+o.Note)
		}
	}
	assert.Equal(t, []string{"edge-settings: as its Application's last audit found it: that Application is not audited now"}, stale, "%s", dump(rep))
	unreachable := func(m string) bool { return strings.Contains(m, edge) && strings.Contains(m, "unreachable") }
	c.wait(t, "message that the edge cluster is unreachable", unreachable)
	settle(t, f, c, f.Prefix+"-settle-1") // a later edit's message: the daemon audited past the outage

	require.NoError(t, member.StartAPIServer(ctx))
	require.Eventually(t, func() bool {
		rep = runAudit(t, a, f.Env)
		for _, o := range rep.Objects {
			if o.Name == "edge-settings" && o.Cluster == member.Name && len(o.Fields) == 2 && o.Note == "" {
				return true
			}
		}
		return false
	}, time.Minute, time.Second, "the edge cluster was never audited again")
	assert.Equal(t, []fleet.Status{{Name: member.Name, Server: member.URL, Reachable: true}}, withoutDetail(fl.Status()))
	c.wait(t, "message that the outage ended", func(m string) bool { return strings.Contains(m, "Audited again") && strings.Contains(m, edge) })
	settle(t, f, c, f.Prefix+"-settle-2")
	// The messages about the edge cluster, by title: the set says each was posted once.
	var titles []string
	for _, m := range c.messages() {
		var msg struct {
			Text string `json:"text"`
		}
		require.NoError(t, json.Unmarshal([]byte(m), &msg))
		if strings.Contains(msg.Text, edge) {
			titles = append(titles, msg.Text)
		}
	}
	sort.Strings(titles)
	settings := "ConfigMap " + dest + "/edge-settings on cluster " + member.Name
	assert.Equal(t, []string{
		"Audited again in prod: Application argocd/" + edge,
		"Drift in prod: " + settings + " .data.model",
		"Drift in prod: " + settings + " .data.replicas",
		"Not audited in prod: Application argocd/" + edge,
	}, titles, "one outage message (not drift) and its end; each edge edit once; none called resolved:\n%s", strings.Join(c.messages(), "\n---\n"))
}

// withoutDetail drops the error text and the time of each status.
func withoutDetail(sts []fleet.Status) []fleet.Status {
	for i := range sts {
		sts[i].Error, sts[i].Since = "", time.Time{}
	}
	return sts
}

// blameOf asks the daemon's blame API.
func blameOf(t *testing.T, d *daemon.Daemon, q url.Values) *blame.Blame {
	t.Helper()
	resp, err := http.Get("http://" + d.Addr() + "/api/v1/blame?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var b blame.Blame
	require.NoError(t, json.Unmarshal(body, &b))
	return &b
}
