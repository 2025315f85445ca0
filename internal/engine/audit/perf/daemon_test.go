package perf

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// chat is a Slack-compatible webhook on loopback that records when each message arrived.
type chat struct {
	mu sync.Mutex
	at []time.Time
}

func (c *chat) count() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.at) }

func (c *chat) last() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at[len(c.at)-1] }

// newChat starts a chat webhook on loopback until the benchmark ends, and writes its URL to a
// file in dir, as a sink's urlFile.
func newChat(b *testing.B, dir string) (*chat, string) {
	b.Helper()
	c := &chat{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.at = append(c.at, time.Now())
		c.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	b.Cleanup(srv.Close)
	urlFile := filepath.Join(dir, "slack-url")
	if err := os.WriteFile(urlFile, []byte(srv.URL+"/services/T0/B0/X"), 0o600); err != nil {
		b.Fatal(err)
	}
	return c, urlFile
}

// BenchmarkEditToChat10000 times a hand edit reaching chat through `auditor serve` — the process
// a user runs, with the default settings (50 ms debounce, 10 s fold window, 1 m Git fetch, 5 m
// resync, the dispatcher's rate limit) — over an env of 10,000 objects: kubectl scale of one
// Deployment, the watch event, the re-audit, the message, the HTTP POST. Edits alternate the
// replicas between 3 and Git's 2, so each one yields one message (a drift or its resolution), and
// are spaced past the fold window, so each message is the leading edge of a quiet env (an edit
// inside the window is folded into the digest at its end by design). Every minute the daemon also
// fetches Git and audits the env in full; an edit that lands then waits for it, and counts.
//
// Two phases: 20 edits with Git still (p50-ms, and p99-ms, which by nearest rank is the slowest
// of 20); then a commit to Git that changes a rendered file but no object, which Argo CD syncs
// (the Application's synced revision moves: recordSync). The daemon renders the env again in a
// render worker, in the background, and audits it in full once the render is in
// (sync-to-audited-s). Meanwhile an edit in a second env of the same daemon, 100 objects, reaches
// chat as usual (other-env-edit-during-render-ms), and an edit in the big env waits for its new
// revision's render (edit-during-new-render-s: comparing with the revision before would report
// Argo CD's sync as drift). Then edits go on for eleven minutes, two resync intervals
// (push-p50-ms; push-slowest-ms).
// Memory is sampled every second from ready to the end: the daemon's RSS (p50 and max). Where
// the benchmark may make a memory cgroup (Linux, cgroup v1 or v2 with the memory controller), the
// daemon starts in one, as in a container, and the figures a container's limit is held to are
// reported: the working set (usage less inactive file pages, what the kubelet evicts on; max
// over the samples) and the peak charge over the daemon's whole life, start-up and every render
// worker included (v1's max_usage_in_bytes also counts page cache the kernel could reclaim).
// The last render worker's own peak comes from the daemon's metric (reportMemory), as samples a
// second apart miss a worker's peak. CPU is the daemon's own and its workers', per minute after
// ready.
func BenchmarkEditToChat10000(b *testing.B) {
	testcluster.Need(b)
	const n, edits = 10000, 20
	prefix := "b" + strconv.Itoa(n)
	objs := corpus(prefix, n)
	ensure(b, prefix, objs)
	env := "e" + strconv.Itoa(n)
	small := corpus(prefix+"s", 100) // the second env's objects, in namespaces of their own
	ensure(b, prefix+"s", small)
	dir := benchRepo(b, env, objs, benchEnv{env: env + "s", base: "small", objs: small})
	bin := auditorBinary(b)

	state := b.TempDir()
	c, urlFile := newChat(b, state)
	addr := freeAddr(b)
	cfg := map[string]any{ // only what locates things; every tuning knob at its default
		"repo": dir, "envs": []string{env, env + "s"}, "kubeconfig": cluster.Kubeconfig, "stateDir": filepath.Join(state, "state"),
		"listen": addr, "api": map[string]any{"auth": "none", "pprof": true},
		"sinks": []any{map[string]any{"name": "slack", "slack": map[string]any{"urlFile": urlFile}}},
	}
	cfgFile := writeConfig(b, state, cfg)
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "serve", "--config", cfgFile)
	cg, err := newMemCgroup("auditor-bench-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		b.Logf("no memory cgroup for the daemon (%v): container figures not reported", err)
		cg = nil
	} else {
		cmd = cg.command(bin, "serve", "--config", cfgFile)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	started := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if cg != nil {
			cg.remove()
		}
	}()
	for !ready(addr) {
		if time.Since(started) > 20*time.Minute {
			b.Fatalf("daemon not ready after 20m:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	firstAudit := time.Since(started)
	profiles := os.Getenv("BENCH_PROFILE_DIR")
	mem := startSampler(pid, cg, time.Second, func(rss float64) {
		if profiles != "" { // the daemon's heap near its highest RSS, for go tool pprof
			saveHeapProfile(addr, filepath.Join(profiles, "daemon-heap-peak.pprof"))
		}
	})
	cpuAtReady, reapedAtReady := cpuSeconds(pid)
	readyAt := time.Now()
	// The every-100th Deployments drifted by ensure make one digest at start: wait it out.
	time.Sleep(11 * time.Second)

	i, made := 0, map[*unstructured.Unstructured]int{}
	// edit scales target, a Deployment ensure left in sync, to 3 and back to Git's 2 at the next
	// edit, and times the message it causes.
	edit := func(target *unstructured.Unstructured, wait time.Duration) time.Duration {
		replicas := "3"
		if made[target]%2 == 1 {
			replicas = "2"
		}
		made[target]++
		i++
		before := c.count()
		out, err := cluster.Kubectl(context.Background(), "-n", target.GetNamespace(), "scale", "deployment/"+target.GetName(), "--replicas="+replicas).CombinedOutput()
		if err != nil {
			b.Fatalf("kubectl scale: %v\n%s", err, out)
		}
		stored := time.Now()
		deadline := stored.Add(wait)
		for c.count() == before {
			if time.Now().After(deadline) {
				b.Fatalf("edit %d: no message after %s:\n%s", i, wait, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return c.last().Sub(stored)
	}
	quiet := func() { time.Sleep(10*time.Second + 500*time.Millisecond) } // past the fold window the message opened
	var still, pushed []time.Duration
	var duringRender, syncToAudited, otherEnv time.Duration
	for b.Loop() {
		for range edits {
			still = append(still, edit(objs[1], 90*time.Second))
			quiet()
		}
		workers := scrape(addr)["auditor_render_workers_total"]
		f := filepath.Join(dir, "base", "bench", objs[1].GetNamespace()+".yaml")
		appendFile(b, f, "# a comment: a new revision, a new render, no object changed\n")
		gitIn(b, dir, "commit", "-qam", "bench: touch "+filepath.Base(f))
		// Argo CD syncs the commit: the Application's synced revision moves, the daemon (watching
		// Applications) renders the new revision in a worker and audits it while edits go on.
		// Without the sync the commit would only be pending (the synced revision stays audited).
		newHead := recordSync(b, env, dir)
		synced := time.Now()
		audited := make(chan time.Duration, 1) // when /api/v1/status first shows the new revision
		go func() {
			for !strings.Contains(apiStatus(b, addr), `"revision": "`+newHead+`"`) && time.Since(synced) < 30*time.Minute {
				time.Sleep(100 * time.Millisecond)
			}
			audited <- time.Since(synced)
		}()
		// Edits once the new revision's render has started land while kustomize runs (minutes at
		// this size): the other env's is audited meanwhile; the big env's waits for the render.
		for scrape(addr)["auditor_render_workers_total"] <= workers {
			if time.Since(synced) > 2*time.Minute {
				b.Fatalf("no render of the synced commit started in 2m:\n%s", logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		otherEnv = edit(small[1], 90*time.Second)
		if !strings.Contains(apiStatus(b, addr), `"rendering": "`+newHead+`"`) {
			b.Fatalf("the other env's edit reached chat after the new revision's render:\n%s", apiStatus(b, addr))
		}
		quiet()
		if !strings.Contains(apiStatus(b, addr), `"rendering": "`+newHead+`"`) {
			b.Fatalf("the new revision's render ended before the big env's edit:\n%s", apiStatus(b, addr))
		}
		duringRender = edit(objs[1], 30*time.Minute)
		quiet()
		if syncToAudited = <-audited; syncToAudited >= 30*time.Minute {
			b.Fatalf("the synced commit %s is not audited after 30m:\n%s", newHead, apiStatus(b, addr))
		}
		push := time.Now()
		for time.Since(push) < 11*time.Minute { // two resync intervals on the new revision
			pushed = append(pushed, edit(objs[1], 90*time.Second))
			quiet()
		}
	}
	samples := mem.finish()
	minutes := time.Since(readyAt).Minutes()
	cpu, reaped := cpuSeconds(pid)
	b.ReportMetric(pct(still, 50).Seconds()*1000, "p50-ms")
	b.ReportMetric(pct(still, 99).Seconds()*1000, "p99-ms")
	b.ReportMetric(pct(pushed, 50).Seconds()*1000, "push-p50-ms")
	b.ReportMetric(pct(pushed, 100).Seconds()*1000, "push-slowest-ms")
	b.ReportMetric(duringRender.Seconds(), "edit-during-new-render-s")
	b.ReportMetric(otherEnv.Seconds()*1000, "other-env-edit-during-render-ms")
	b.ReportMetric(syncToAudited.Seconds(), "sync-to-audited-s")
	b.ReportMetric(float64(len(still)+len(pushed)), "edits")
	b.ReportMetric(firstAudit.Seconds(), "start-to-ready-s")
	b.ReportMetric((cpu-cpuAtReady)/minutes, "daemon-cpu-s/min")
	b.ReportMetric((reaped-reapedAtReady)/minutes, "worker-cpu-s/min")
	b.ReportMetric(reapedAtReady, "start-worker-cpu-s")
	if profiles != "" { // the daemon's heap at the end, for go tool pprof
		saveHeapProfile(addr, filepath.Join(profiles, "daemon-heap.pprof"))
	}
	status := procStatus(pid)
	b.ReportMetric(status["VmRSS"]/1024, "daemon-RSS-MiB")
	b.ReportMetric(status["VmHWM"]/1024, "daemon-peak-RSS-MiB")
	b.ReportMetric(stat(samples, 50, func(m memSample) float64 { return m.daemon }), "daemon-RSS-p50-MiB")
	b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.daemon }), "daemon-RSS-max-MiB")
	if cg != nil {
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.workingSet }), "container-working-set-max-MiB")
		b.ReportMetric(cg.peak()/(1<<20), "container-peak-MiB")
	}
	b.ReportMetric(float64(len(samples)), "memory-samples")
	reportMemory(b, addr, pid)
	b.ReportMetric(float64(n), "objects")
}

// saveHeapProfile writes the heap profile of the daemon listening on addr (with api.pprof) to file.
func saveHeapProfile(addr, file string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if data, err := io.ReadAll(resp.Body); err == nil {
		_ = os.WriteFile(file, data, 0o644)
	}
}

// freeAddr is a loopback address no one listens on, for a daemon to take.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// writeConfig writes the daemon's config (JSON is YAML) into dir and returns its path.
func writeConfig(b *testing.B, dir string, cfg map[string]any) string {
	b.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// appendFile appends text to the file at path.
func appendFile(b *testing.B, path, text string) {
	b.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// gitIn runs git in dir as the benchmark's author.
func gitIn(b *testing.B, dir string, args ...string) {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// reportMemory reports where the daemon's resident memory goes: anonymous pages (the Go heap,
// stacks, runtime) against file pages (mostly the binary's text), and, from the Go runtime's own
// series on /metrics, the heap in use, the heap kept but idle (not yet given back to the system),
// goroutine stacks and the heap size the next GC aims at; with the peak resident size of the
// last render worker (a child process) when the daemon renders out of process.
func reportMemory(b *testing.B, addr string, pid int) {
	const mib = 1 << 20
	status := procStatus(pid)
	b.ReportMetric(status["RssAnon"]/1024, "daemon-RssAnon-MiB")
	b.ReportMetric(status["RssFile"]/1024, "daemon-RssFile-MiB")
	m := scrape(addr)
	b.ReportMetric(m["go_memstats_heap_inuse_bytes"]/mib, "go-heap-inuse-MiB")
	b.ReportMetric((m["go_memstats_heap_idle_bytes"]-m["go_memstats_heap_released_bytes"])/mib, "go-heap-idle-kept-MiB")
	b.ReportMetric(m["go_memstats_stack_inuse_bytes"]/mib, "go-stacks-MiB")
	b.ReportMetric(m["go_memstats_next_gc_bytes"]/mib, "go-next-gc-MiB")
	if v, ok := m["auditor_render_worker_peak_rss_bytes"]; ok {
		b.ReportMetric(v/mib, "render-worker-peak-RSS-MiB")
	}
}

// procStatus reads the kB figures of /proc/<pid>/status (VmRSS, RssAnon, RssFile, ...).
func procStatus(pid int) map[string]float64 {
	out := map[string]float64{}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			kb, _ := strconv.ParseFloat(f[0], 64)
			out[k] = kb
		}
	}
	return out
}

// scrape reads the series of the daemon's /metrics (Prometheus text format), keyed by name and
// labels as written (`auditor_audits_total{mode="full"}`).
func scrape(addr string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(line, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// apiStatus is the daemon's GET /api/v1/status, or "" when it does not answer.
func apiStatus(b *testing.B, addr string) string {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/status")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

func ready(addr string) bool {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// lockedBuffer is a log buffer a process writes while the benchmark may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// pct returns the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	idx := (len(s)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return s[idx]
}
