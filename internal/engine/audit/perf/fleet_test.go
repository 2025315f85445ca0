package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// fleetReplica is one `auditor serve` process of BenchmarkFleetOf3ClustersOf10000.
type fleetReplica struct {
	id, addr string
	cmd      *exec.Cmd
	logs     *lockedBuffer
}

// shards returns the clusters the replica holds, as its status says.
func (r *fleetReplica) shards() ([]string, bool) {
	resp, err := http.Get("http://" + r.addr + "/api/v1/status")
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	var st struct {
		Ready  bool     `json:"ready"`
		Shards []string `json:"shards"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return nil, false
	}
	return st.Shards, st.Ready
}

func (r *fleetReplica) rssMiB() float64 { return procStatus(r.cmd.Process.Pid)["VmRSS"] / 1024 }

var auditedLine = regexp.MustCompile(`^auditor_application_audited\{application="([^"]+)",cluster="([^"]+)",env="fleet"\} 1$`)

// audited returns the clusters of the Applications the replica audited, as its metric says.
func (r *fleetReplica) audited() map[string]bool {
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := auditedLine.FindStringSubmatch(sc.Text()); m != nil {
			out[m[2]] = true
		}
	}
	return out
}

// BenchmarkFleetOf3ClustersOf10000 times `auditor serve` over three clusters of 10,000 objects
// each: Argo CD's own and two members, each with its own kube-apiserver and etcd. One env holds
// three Applications, one per cluster, selected by label; every setting is the default but the
// Lease names. The members are read with the auditor's own read-only kubeconfig.
//
// One replica first (leaderElection.shard: it holds all three clusters): start-to-ready, its
// RSS (sampled every second from ready, and its peak), and hand edits to chat. Edits go round
// the clusters, one kubectl scale at a time, each timed from the API server's answer to the
// chat POST; each is the first of its cluster's fold window (spaced 11 s per cluster).
// Then two more replicas join: the clusters each takes (shards-moved-on-join) and the time until
// every cluster is held once and audited by its holder (join-to-settled-s). Each replica's RSS once settled. Then the replica
// holding the most clusters is killed with SIGKILL: the clusters that move, the time until the
// others hold and have audited them (kill-to-audited-s: the membership's expiry, the cluster's
// render and its cache's first list), and an edit on a moved cluster to chat.
func BenchmarkFleetOf3ClustersOf10000(b *testing.B) {
	testcluster.Need(b)
	const n, rounds = 10000, 4
	ctx := context.Background()
	type target struct {
		name   string
		c      *testcluster.Cluster
		server string
		reader string
		objs   []*unstructured.Unstructured
	}
	targets := []*target{{name: "in-cluster", c: cluster, server: "https://kubernetes.default.svc"}}
	for _, name := range []string{"fleet-b", "fleet-c"} {
		m, err := cluster.AddCluster(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		targets = append(targets, &target{name: m.Name, c: &testcluster.Cluster{Cluster: m.Cluster}, server: m.URL, reader: m.ReaderKubeconfig})
	}
	var envs []benchEnv
	for i, t := range targets {
		prefix := fmt.Sprintf("f%d", i)
		t.objs = corpus(prefix, n)
		start := time.Now()
		ensureOn(b, t.c, prefix, t.objs)
		b.Logf("%s: %d objects in %s", t.name, n, time.Since(start).Round(time.Second))
		envs = append(envs, benchEnv{env: "fleet" + strings.TrimPrefix(t.name, "fleet"), base: prefix, objs: t.objs})
	}
	envs[0].env = "fleet"
	dir := benchRepoOf(b, envs...) // Applications llm-fleet, llm-fleet-b and llm-fleet-c, synced
	for i, t := range targets[1:] {
		app := "llm-" + envs[i+1].env
		patch := fmt.Sprintf(`{"metadata":{"labels":{"fleet-bench":"yes"}},"spec":{"destination":{"server":%q}}}`, t.server)
		if out, err := cluster.Kubectl(ctx, "-n", "argocd", "patch", "application", app, "--type=merge", "-p", patch).CombinedOutput(); err != nil {
			b.Fatalf("patch %s: %v\n%s", app, err, out)
		}
	}
	bin := auditorBinary(b)
	state := b.TempDir()
	c, urlFile := newChat(b, state)
	var clusters []any
	for _, t := range targets[1:] {
		clusters = append(clusters, map[string]any{"name": t.name, "server": t.server, "kubeconfig": t.reader})
	}
	var replicas []*fleetReplica
	start := func(id string) *fleetReplica {
		addr := freeAddr(b)
		cfg := map[string]any{
			"repo": dir, "envs": []string{"fleet"}, "kubeconfig": cluster.Kubeconfig, "stateDir": filepath.Join(state, id),
			"listen": addr, "api": map[string]any{"auth": "none"}, "clusters": clusters,
			"applications":   map[string]any{"fleet": map[string]any{"selector": "fleet-bench=yes"}},
			"leaderElection": map[string]any{"enabled": true, "shard": true, "namespace": "default", "name": "fleetbench", "identity": id},
			"sinks":          []any{map[string]any{"name": "slack", "slack": map[string]any{"urlFile": urlFile}}},
		}
		r := &fleetReplica{id: id, addr: addr, logs: &lockedBuffer{}}
		cfgDir := filepath.Join(state, "config-"+id)
		if err := os.MkdirAll(cfgDir, 0o700); err != nil {
			b.Fatal(err)
		}
		r.cmd = exec.Command(bin, "serve", "--config", writeConfig(b, cfgDir, cfg))
		r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
		if err := r.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		replicas = append(replicas, r)
		return r
	}
	logs := func() string {
		var s strings.Builder
		for _, r := range replicas {
			fmt.Fprintf(&s, "=== %s\n%s\n", r.id, r.logs.String())
		}
		return s.String()
	}
	defer func() {
		for _, r := range replicas {
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			_ = r.cmd.Wait()
		}
	}()
	// settle waits until the live replicas hold each cluster once, are ready and have audited
	// the Application of each cluster they hold; it returns each cluster's holder.
	settle := func(live []*fleetReplica, within time.Duration) map[string]*fleetReplica {
		deadline := time.Now().Add(within)
		for {
			holders, ok := map[string]*fleetReplica{}, true
			for _, r := range live {
				shards, ready := r.shards()
				ok = ok && ready
				audited := r.audited()
				for _, sh := range shards {
					// Held once, and its Application audited by its holder (the render and
					// the cache of a cluster taken over are in).
					ok = ok && holders[sh] == nil && audited[sh]
					holders[sh] = r
				}
			}
			if ok && len(holders) == len(targets) {
				return holders
			}
			if time.Now().After(deadline) {
				b.Fatalf("clusters not held once each after %s:\n%s", within, logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	made := map[*target]int{}
	edit := func(t *target) time.Duration {
		replicas := "3"
		if made[t]%2 == 1 {
			replicas = "2"
		}
		made[t]++
		before := c.count()
		o := t.objs[1]
		out, err := t.c.Kubectl(ctx, "-n", o.GetNamespace(), "scale", "deployment/"+o.GetName(), "--replicas="+replicas).CombinedOutput()
		if err != nil {
			b.Fatalf("kubectl scale on %s: %v\n%s", t.name, err, out)
		}
		stored := time.Now()
		for c.count() == before {
			if time.Since(stored) > 90*time.Second {
				b.Fatalf("edit on %s: no message after 90s:\n%s", t.name, logs())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return c.last().Sub(stored)
	}

	for b.Loop() {
		began := time.Now()
		first := start("auditor-0")
		settle(replicas, 30*time.Minute)
		b.ReportMetric(time.Since(began).Seconds(), "start-to-ready-s")
		b.Logf("one replica: ready and every cluster audited %s after start", time.Since(began).Round(time.Second))
		mem := startSampler(first.cmd.Process.Pid, nil, time.Second, nil)
		time.Sleep(11 * time.Second) // the every-100th Deployments drifted by ensure make a digest per cluster
		var lat []time.Duration
		for range rounds {
			for _, t := range targets {
				lat = append(lat, edit(t))
				time.Sleep(4 * time.Second) // 3 clusters × (4 s + the edit) > the 10 s fold window
			}
		}
		samples := mem.finish()
		b.Logf("one replica: edits to chat %v", roundAll(lat))
		b.ReportMetric(pct(lat, 50).Seconds()*1000, "p50-ms")
		b.ReportMetric(pct(lat, 99).Seconds()*1000, "p99-ms")
		b.ReportMetric(float64(len(lat)), "edits")
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.daemon }), "one-replica-RSS-max-MiB")
		b.ReportMetric(procStatus(first.cmd.Process.Pid)["VmHWM"]/1024, "one-replica-peak-RSS-MiB")
		b.Logf("one replica: RSS max %.0f MiB sampled, peak %.0f MiB", stat(samples, 100, func(m memSample) float64 { return m.daemon }),
			procStatus(first.cmd.Process.Pid)["VmHWM"]/1024)
		reportMemory(b, first.addr, first.cmd.Process.Pid)

		joined := time.Now()
		before, _ := first.shards()
		start("auditor-1")
		start("auditor-2")
		holders := settle(replicas, 10*time.Minute)
		b.ReportMetric(time.Since(joined).Seconds(), "join-to-settled-s")
		b.Logf("two replicas joined: settled after %s", time.Since(joined).Round(time.Second))
		after, _ := first.shards()
		b.ReportMetric(float64(len(before)-len(after)), "shards-moved-on-join")
		time.Sleep(30 * time.Second) // the full audits after the moves, and their memory given back
		for i, r := range replicas {
			shards, _ := r.shards()
			b.Logf("%s holds %v: RSS %.0f MiB", r.id, shards, r.rssMiB())
			b.ReportMetric(r.rssMiB(), fmt.Sprintf("replica-%d-RSS-MiB", i))
		}

		victim := replicas[0]
		for _, r := range replicas {
			if s, _ := r.shards(); len(s) > func() int { v, _ := victim.shards(); return len(v) }() {
				victim = r
			}
		}
		moved, _ := victim.shards()
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		_ = victim.cmd.Wait()
		killed := time.Now()
		survivors := slices.DeleteFunc(slices.Clone(replicas), func(r *fleetReplica) bool { return r == victim })
		holders = settle(survivors, 20*time.Minute) // a render of 10,000 objects, on a loaded machine
		b.ReportMetric(time.Since(killed).Seconds(), "kill-to-audited-s")
		b.Logf("%s killed: %v audited by the others after %s", victim.id, moved, time.Since(killed).Round(time.Second))
		b.ReportMetric(float64(len(moved)), "shards-moved-on-kill")
		if len(moved) > 0 {
			for _, t := range targets {
				if t.name == moved[0] {
					time.Sleep(11 * time.Second) // past any fold window the takeover's audit opened
					b.ReportMetric(edit(t).Seconds()*1000, "edit-after-takeover-ms")
					b.Logf("%s moved from %s to %s", t.name, victim.id, holders[t.name].id)
				}
			}
		}
		replicas = survivors
	}
	b.ReportMetric(float64(n), "objects-per-cluster")
}
