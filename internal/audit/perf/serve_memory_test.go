package perf

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/testcluster"
)

// BenchmarkServeMemoryProdEnv measures what the shipped StatefulSet's memory limit must hold:
// `auditor serve` auditing this repository's prod env (applied to the cluster first, so its
// informers hold the live objects) with the shipped config's settings, in a memory cgroup of its
// own as a container would be. After ready it runs for two fetch intervals (two full audits) and
// answers a blame request, whose walk renders older commits in render workers. Reported: the
// cgroup's peak charge (start-up included) and its working set, the daemon's RSS, its workers'.
// Without a memory cgroup (not Linux, or not allowed) the benchmark is skipped: the container's
// figure is its point.
func BenchmarkServeMemoryProdEnv(b *testing.B) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		b.Fatal(err)
	}
	src, err := render.FromDir(root)
	if err != nil {
		b.Fatal(err)
	}
	res, err := src.Render("prod")
	if err != nil {
		b.Fatal(err)
	}
	syncer, err := testcluster.NewSyncer(cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	if err := syncer.Sync(context.Background(), "llm-prod", res.Objects, false); err != nil {
		b.Fatal(err)
	}
	bin := auditorBinary(b)
	state := b.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := map[string]any{ // base/auditor/config.yaml's settings, but a local repo and no chat
		"repo": root, "envs": []string{"prod"}, "kubeconfig": cluster.Kubeconfig, "stateDir": filepath.Join(state, "state"),
		"watchNamespaces": []string{"llm-inference", "llm-api", "llm-rag", "llm-batch", "llm-monitoring", "llm-system"},
		"listen":          addr, "api": map[string]any{"auth": "none"},
	}
	data, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(state, "config.yaml")
	if err := os.WriteFile(cfgFile, data, 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		logs := &lockedBuffer{}
		cmd := exec.Command(bin, "serve", "--config", cfgFile)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pid := cmd.Process.Pid
		cg, err := newMemCgroup("auditor-bench-" + strconv.Itoa(pid))
		if err == nil {
			err = cg.add(pid)
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			b.Skipf("no memory cgroup for the daemon: %v", err)
		}
		mem := startSampler(pid, cg, 250*time.Millisecond)
		started := time.Now()
		for !ready(addr) {
			if time.Since(started) > 5*time.Minute {
				b.Fatalf("daemon not ready after 5m:\n%s", logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(time.Since(started).Seconds(), "start-to-ready-s")
		q := url.Values{"env": {"prod"}, "kind": {"deployment"}, "namespace": {"llm-inference"}, "name": {"vllm-qwen"}}
		resp, err := http.Get("http://" + addr + "/api/v1/blame?" + q.Encode())
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("blame: %s\n%s", resp.Status, logs.String())
		}
		// Two more full audits (a fetch each, every minute), counted from the daemon's own metric.
		const fullAudits = `auditor_audits_total{mode="full"}`
		want := scrape(addr)[fullAudits] + 2
		for scrape(addr)[fullAudits] < want {
			if time.Since(started) > 8*time.Minute {
				b.Fatalf("no two full audits after ready:\n%s", logs.String())
			}
			time.Sleep(time.Second)
		}
		samples := mem.finish()
		m := scrape(addr)
		b.ReportMetric(m["auditor_render_workers_total"], "render-workers")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		b.ReportMetric(cg.peak()/(1<<20), "container-peak-MiB")
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.workingSet }), "container-working-set-max-MiB")
		b.ReportMetric(stat(samples, 50, func(m memSample) float64 { return m.workingSet }), "container-working-set-p50-MiB")
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.daemon }), "daemon-RSS-max-MiB")
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.workers }), "workers-RSS-max-MiB")
		b.ReportMetric(float64(len(res.Objects)), "objects")
		cg.remove()
	}
}
