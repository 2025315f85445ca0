package daemon

import (
	"k8s.io/utils/ptr"

	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/daemon/shard"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/testing/gittest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// shardedFleet is 30 Applications, each one ConfigMap in a namespace of its own, spread over
// Argo CD's cluster and two member clusters, synced as Argo CD syncs them.
type shardedFleet struct {
	prefix  string
	repo    string
	members []*testcluster.Member
	apps    []string          // Application names
	on      map[string]string // Application -> shard
	kubectl map[string]func(...string)
}

func newShardedFleet(t *testing.T, n int) *shardedFleet {
	t.Helper()
	ctx := context.Background()
	f := &shardedFleet{prefix: fmt.Sprintf("sh%04x", rand.IntN(1<<16)), repo: t.TempDir(), on: map[string]string{},
		kubectl: map[string]func(...string){}}
	targets := map[string]*testcluster.Cluster{audit.InCluster: cluster}
	servers := map[string]string{audit.InCluster: "https://kubernetes.default.svc"}
	for _, name := range []string{"b", "c"} {
		m, err := cluster.AddCluster(ctx, f.prefix+"-"+name)
		require.NoError(t, err)
		f.members = append(f.members, m)
		targets[m.Name], servers[m.Name] = &testcluster.Cluster{Cluster: m.Cluster}, m.URL
	}
	shards := []string{audit.InCluster, f.members[0].Name, f.members[1].Name}
	for name, c := range targets {
		f.kubectl[name] = func(args ...string) {
			t.Helper()
			if out, err := c.Kubectl(ctx, args...).CombinedOutput(); err != nil {
				t.Fatalf("kubectl %v on %s: %v\n%s", args, name, err, out)
			}
		}
	}
	const repoURL = "https://git.example.com/fleet.git"
	files := map[string]string{"overlays/fleet/kustomization.yaml": "resources: [cm.yaml]\n",
		"overlays/fleet/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hub, namespace: " + f.prefix + "-hub}\ndata: {marker: hub}\n"}
	objs := map[string][]*unstructured.Unstructured{}
	var apps []*unstructured.Unstructured
	app := func(name, path, ns, server string, labels map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": "argocd", "labels": labels},
			"spec": map[string]any{"project": "default",
				"source":      map[string]any{"repoURL": repoURL, "path": path, "targetRevision": "HEAD"},
				"destination": map[string]any{"server": server, "namespace": ns}},
		}}
	}
	for i := range n {
		name := fmt.Sprintf("%s-a%02d", f.prefix, i)
		on := shards[i%len(shards)]
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cfg", "namespace": name}, "data": map[string]any{"marker": name}}}
		for file, o := range map[string]*unstructured.Unstructured{"ns.yaml": ns, "cm.yaml": cm} {
			data, err := yaml.Marshal(o.Object)
			require.NoError(t, err)
			files[filepath.Join("apps", name, file)] = string(data)
		}
		files[filepath.Join("apps", name, "kustomization.yaml")] = "resources: [ns.yaml, cm.yaml]\n"
		objs[name] = []*unstructured.Unstructured{ns, cm}
		apps = append(apps, app(name, "apps/"+name, name, servers[on], map[string]any{"shard-test": f.prefix}))
		f.apps = append(f.apps, name)
		f.on[name] = on
	}
	gittest.WriteFiles(t, f.repo, files)
	gittest.Run(t, f.repo, "init", "-q", "-b", "main")
	gittest.Run(t, f.repo, "add", "-A")
	gittest.Run(t, f.repo, "commit", "-q", "-m", "fleet")
	head := strings.TrimSpace(gittest.Run(t, f.repo, "rev-parse", "HEAD"))

	hub, err := testcluster.NewSyncer(cluster.Config)
	require.NoError(t, err)
	main := app(f.prefix+"-fleet", "overlays/fleet", f.prefix+"-hub", servers[audit.InCluster], nil)
	hubObjs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": f.prefix + "-hub"}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "hub", "namespace": f.prefix + "-hub"},
			"data": map[string]any{"marker": "hub"}}}}
	require.NoError(t, hub.Sync(ctx, main.GetName(), hubObjs, false))
	require.NoError(t, hub.RecordSync(ctx, main, repoURL, head))
	syncers := map[string]*testcluster.Syncer{audit.InCluster: hub}
	for _, m := range f.members {
		s, err := testcluster.NewSyncer(m.Config)
		require.NoError(t, err)
		syncers[m.Name] = s
	}
	for i, a := range apps {
		name := f.apps[i]
		require.NoError(t, syncers[f.on[name]].Sync(ctx, name, objs[name], false))
		require.NoError(t, hub.RecordSync(ctx, a, repoURL, head))
	}
	return f
}

// config is one replica's configuration: the fleet's env, both members with the auditor's
// read-only credentials, one chat receiver, and the work shared over Leases.
func (f *shardedFleet) config(t *testing.T, h *harness, id string, fold time.Duration) *Config {
	cfg := &Config{
		Repo: f.repo, Envs: []string{"fleet"}, Kubeconfig: cluster.Kubeconfig, AppNamePrefix: ptr.To(f.prefix + "-"),
		Applications: map[string]AppSelectionConfig{"fleet": {Selector: "shard-test=" + f.prefix}},
		StateDir:     t.TempDir(), ArgoCDURL: "https://argocd.example.com", API: APIConfig{Auth: APIAuthNone},
		FetchInterval: Duration{time.Minute}, Debounce: Duration{20 * time.Millisecond}, FoldWindow: Duration{fold},
		Dispatch: DispatchConfig{BackoffBase: Duration{50 * time.Millisecond}, BackoffMax: Duration{200 * time.Millisecond}, Rate: 100, Burst: 100},
		Sinks:    []SinkConfig{{Name: "slack", Slack: &sinks.SlackConfig{URLFile: h.secretFile("slack", h.receivers[0].srv.URL+"/services/T000/B000/XXXX")}}},
		// The defaults of a deployment: a dead replica's clusters are taken within 30 s.
		LeaderElection: LeaderElectionConfig{Enabled: true, Shard: true, Namespace: "default", Name: f.prefix + "-auditor", Identity: id},
	}
	for _, m := range f.members {
		cfg.Clusters = append(cfg.Clusters, fleet.Cluster{Name: m.Name, Server: m.URL, Kubeconfig: m.ReaderKubeconfig})
	}
	require.NoError(t, cfg.validate())
	return cfg
}

var auditedLine = regexp.MustCompile(`^auditor_application_audited\{application="([^"]+)",cluster="([^"]+)",env="fleet"\} 1$`)

// audited scrapes the replica's metric of the Applications it audits: name -> cluster.
func (r *replica) audited() (map[string]string, bool) {
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := auditedLine.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out, sc.Err() == nil
}

var reachableLine = regexp.MustCompile(`^auditor_cluster_reachable\{cluster="([^"]+)"\} 1$`)

// reachable scrapes the replica's metric of the clusters it found reachable.
func (r *replica) reachable(t *testing.T) []string {
	resp, err := http.Get("http://" + r.addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := reachableLine.FindStringSubmatch(sc.Text()); m != nil {
			out = append(out, m[1])
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// settled waits until the live replicas hold every shard once, and each Application is
// audited by exactly one of them, the one that holds its cluster. It returns the holder of
// each shard.
func (fl *replicaGroup) settled(f *shardedFleet, within time.Duration) map[string]*replica {
	fl.t.Helper()
	var holders map[string]*replica
	var last string
	ok := assert.Eventually(fl.t, func() bool {
		holders = map[string]*replica{}
		by := map[string][]string{}
		for _, r := range fl.replicas {
			if r.dead {
				continue
			}
			st, ok := r.status()
			if !ok || !st.Ready {
				last = r.id + " not ready"
				return false
			}
			for _, sh := range st.Shards {
				if holders[sh] != nil {
					last = sh + " held twice"
					return false
				}
				holders[sh] = r
			}
			got, ok := r.audited()
			if !ok {
				return false
			}
			for app, on := range got {
				by[app] = append(by[app], r.id+"@"+on)
				if holders[on] != r {
					last = fmt.Sprintf("%s audits %s on %s, a shard it does not hold", r.id, app, on)
					return false
				}
			}
		}
		for _, app := range f.apps {
			if len(by[app]) != 1 {
				last = fmt.Sprintf("%s audited by %v", app, by[app])
				return false
			}
		}
		return len(holders) == 3
	}, within, 100*time.Millisecond)
	if !ok {
		for _, r := range fl.replicas {
			if st, ok := r.status(); ok && !r.dead {
				fl.t.Logf("%s: %s", r.id, jsonOf(st))
			}
		}
		fl.t.Fatalf("not settled: %s\n%s", last, fl.logs())
	}
	return holders
}

// TestReplicasShareClustersAndTakeOverAKilledOnesExactlyOnce runs three `auditor serve`
// processes that share 30 Applications on three clusters. Each Application is audited by one
// replica, the holder of its cluster, as each replica's metric says. Hand edits on every cluster
// reach chat once. The holder of one member is killed with SIGKILL: with one drift of its
// cluster announced and recorded, one held in the fold window, and one made after the kill. A
// survivor takes the cluster over within 30 s. Then the holder of the other member stops
// gracefully with a drift held in its fold window. Each drift reaches chat exactly once, none
// called resolved.
func TestReplicasShareClustersAndTakeOverAKilledOnesExactlyOnce(t *testing.T) {
	testcluster.Need(t)
	if testing.Short() {
		t.Skip("starts two clusters and three daemon processes")
	}
	f := newShardedFleet(t, 30)
	h := &harness{t: t, secretDir: t.TempDir()}
	h.receivers = []*receiver{newReceiver(t, "slack")}
	chat := h.receivers[0]
	fl := &replicaGroup{t: t, bin: auditorBinary(t)}
	// A fold window long enough to kill inside it even on a loaded machine.
	for _, id := range []string{"auditor-0", "auditor-1", "auditor-2"} {
		fl.add(id, f.config(t, h, id, 8*time.Second))
	}
	holders := fl.settled(f, 60*time.Second)
	for sh, r := range holders {
		t.Logf("%s holds %s", r.id, sh)
	}
	// Each replica probes the member clusters it holds, and reports those alone (status, metric).
	for _, r := range fl.replicas {
		var want, inStatus []string
		for sh, h := range holders {
			if h == r && sh != audit.InCluster {
				want = append(want, sh)
			}
		}
		st, ok := r.status()
		require.True(t, ok)
		for _, c := range st.Clusters {
			inStatus = append(inStatus, c.Name)
		}
		assert.ElementsMatch(t, want, inStatus, "%s's status", r.id)
		assert.ElementsMatch(t, want, r.reachable(t), "%s's auditor_cluster_reachable", r.id)
	}

	// One hand edit per cluster, each reported once, by the replica holding that cluster.
	edit := func(app, value string) {
		f.kubectl[f.on[app]]("-n", app, "patch", "configmap", "cfg", "-p", `{"data":{"marker":"`+value+`"}}`)
	}
	appOn := func(sh string, nth int) string {
		for _, a := range f.apps {
			if f.on[a] == sh {
				if nth == 0 {
					return a
				}
				nth--
			}
		}
		t.Fatalf("no Application %d on %s", nth, sh)
		return ""
	}
	victim := f.members[0].Name
	edit(appOn(audit.InCluster, 0), "edit-hub")
	edit(appOn(f.members[1].Name, 0), "edit-c1")
	edit(appOn(victim, 0), "edit-b1") // the leading edge of the victim's cluster: sent at once
	chat.waitMessages(t, 3, 60*time.Second)
	shardRecorded(t, f, victim, appOn(victim, 0))

	// Inside the fold window that message opened: a second drift on the victim's cluster is
	// held, unsent, when its holder is killed.
	owner := holders[victim]
	edit(appOn(victim, 1), "edit-b2")
	fl.seenIn(owner, "fleet", "edit-b2")
	fl.kill(owner)
	killed := time.Now()
	edit(appOn(victim, 2), "edit-b3") // after the kill: no one holds the cluster yet
	var taker *replica
	require.Eventually(t, func() bool {
		for _, r := range fl.replicas {
			if st, ok := r.status(); !r.dead && ok && slices.Contains(st.Shards, victim) {
				taker = r
				return true
			}
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "no replica took %s\n%s", victim, fl.logs())
	took := time.Since(killed)
	t.Logf("%s took %s over %s after the kill", taker.id, victim, took.Round(100*time.Millisecond))
	assert.Less(t, took, 30*time.Second, "a killed replica's cluster is taken over within 30 s")
	fl.settled(f, time.Minute)

	// A graceful stop of the holder of the other member, with a drift of that cluster held in
	// its fold window: it lets the cluster go at once, and the next holder announces the drift.
	other := f.members[1].Name
	holders = fl.settled(f, time.Minute)
	leaving := holders[other]
	edit(appOn(other, 1), "edit-c2")
	fl.seenIn(leaving, "fleet", "edit-c2")
	fl.stop(leaving)
	stopped := time.Now()
	holders = fl.settled(f, time.Minute)
	t.Logf("%s took %s over %s after a graceful stop", holders[other].id, other, time.Since(stopped).Round(100*time.Millisecond))

	tokens := []string{"edit-hub", "edit-c1", "edit-b1", "edit-b2", "edit-b3", "edit-c2"}
	require.Eventually(t, func() bool {
		all := strings.Join(chat.messages(), "\n")
		return strings.Contains(all, "edit-b2") && strings.Contains(all, "edit-b3") && strings.Contains(all, "edit-c2")
	}, 60*time.Second, 100*time.Millisecond, "the survivor never announced the drift around the kill\n%s", fl.logs())
	// A last edit on the taken cluster: once it is in, everything before it is too.
	edit(appOn(victim, 3), "edit-b4")
	tokens = append(tokens, "edit-b4")
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(chat.messages(), "\n"), "edit-b4") },
		60*time.Second, 100*time.Millisecond, "%s never announced the last edit\n%s", taker.id, fl.logs())
	msgs := chat.messages()
	for _, token := range tokens {
		n := 0
		for _, m := range msgs {
			if strings.Contains(m, token) {
				n++
			}
		}
		assert.Equal(t, 1, n, "messages naming %s:\n%s", token, strings.Join(msgs, "\n---\n"))
	}
	for _, m := range msgs {
		assert.NotContains(t, m, "Resolved", "a drift announced resolved")
	}
	if t.Failed() {
		t.Log(fl.logs())
	}
}

// seenIn waits until the replica's own report of env shows token (it has audited the edit).
func (fl *replicaGroup) seenIn(r *replica, env, token string) {
	fl.t.Helper()
	require.Eventually(fl.t, func() bool {
		resp, err := http.Get("http://" + r.addr + "/api/v1/drift?env=" + env)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return strings.Contains(b.String(), token)
	}, 30*time.Second, 10*time.Millisecond, "%s never saw %s\n%s", r.id, token, fl.logs())
}

// shardRecorded waits until the shard's Lease records a drift of app's as announced: the
// holder saved what it delivered (a kill between a send and that save would duplicate it).
func shardRecorded(t *testing.T, f *shardedFleet, name, app string) {
	t.Helper()
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	r := &leaseRecord{leases: cs.CoordinationV1().Leases("default"), name: shard.ShardLease(f.prefix+"-auditor", name),
		annotation: recordAnnotation + "slack"}
	require.Eventually(t, func() bool {
		data, err := r.Load(context.Background())
		return err == nil && strings.Contains(string(data), app+"/cfg") && strings.Contains(string(data), `"drift"`)
	}, 30*time.Second, 20*time.Millisecond, "the record of %s never named %s", name, app)
}
