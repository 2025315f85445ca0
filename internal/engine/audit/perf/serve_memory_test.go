package perf

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// BenchmarkServeMemoryProdEnv runs `auditor serve` as the prod overlay ships it, and measures
// whether its container's memory limit holds: this repository's prod env applied to the cluster
// first (so the informers hold its live objects); the daemon started in a memory cgroup limited
// to the limits.memory of the auditor StatefulSet prod renders, with GOMEMLIMIT set to it as the
// StatefulSet's resourceFieldRef does; the shipped config's settings (base/auditor/config.yaml:
// the six watched namespaces, leader election, 1 m fetch), the repository cloned over
// authenticated smart HTTP (`git http-backend`) into the state directory. After ready it answers
// a blame request (the walk renders older commits in render workers), then a commit is pushed and
// the daemon fetches it, renders it in a worker and audits prod in full. Reported:
// the cgroup's peak charge and working set against the limit, OOM kills (the benchmark fails on
// any), the daemon's and its workers' RSS. Skipped without a memory cgroup: the container's
// figure is its point.
func BenchmarkServeMemoryProdEnv(b *testing.B) {
	testcluster.Need(b)
	root, err := filepath.Abs("../../../..")
	if err != nil {
		b.Fatal(err)
	}
	src, err := render.FromDir(root)
	if err != nil {
		b.Fatal(err)
	}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	if err != nil {
		b.Fatal(err)
	}
	limit := auditorMemoryLimit(b, res.Objects)
	syncer, err := testcluster.NewSyncer(cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	if err := syncer.Sync(context.Background(), "llm-prod", res.Objects, false); err != nil {
		b.Fatal(err)
	}
	bin := auditorBinary(b)
	state := b.TempDir()
	repos := filepath.Join(state, "git")
	gittest.Run(b, root, "clone", "-q", "--bare", root, filepath.Join(repos, "platform.git"))
	srv := gittest.HTTPServer(b, repos, "auditor", "s3cret")
	passFile := filepath.Join(state, "git-password")
	if err := os.WriteFile(passFile, []byte("s3cret"), 0o600); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	cfg := map[string]any{ // base/auditor/config.yaml's settings; this cluster, no chat
		"repo": srv.URL + "/platform.git", "repoAuth": map[string]any{"username": "auditor", "passwordFile": passFile},
		"envs": []string{"prod"}, "kubeconfig": cluster.Kubeconfig, "stateDir": filepath.Join(state, "state"),
		"watchNamespaces": []string{"llm-inference", "llm-api", "llm-rag", "llm-batch", "llm-monitoring", "llm-system"},
		"leaderElection":  map[string]any{"enabled": true, "namespace": "llm-system", "name": "auditor-bench"},
		"fetchInterval":   "1m", "resyncInterval": "5m", "foldWindow": "10s",
		"listen": addr, "api": map[string]any{"auth": "none"},
	}
	cfgFile := writeConfig(b, state, cfg)
	for b.Loop() {
		cg, err := newMemCgroup("auditor-bench-" + strconv.Itoa(os.Getpid()))
		if err == nil {
			err = cg.limit(limit)
		}
		if err != nil {
			b.Skipf("no memory cgroup for the daemon: %v", err)
		}
		logs := &lockedBuffer{}
		cmd := cg.command(bin, "serve", "--config", cfgFile)
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+strconv.FormatInt(limit, 10), "POD_NAME=auditor-0")
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pid := cmd.Process.Pid
		mem := startSampler(pid, cg, 250*time.Millisecond, nil)
		started := time.Now()
		for !ready(addr) {
			if time.Since(started) > 5*time.Minute {
				b.Fatalf("daemon not ready after 5m (OOM kills: %v):\n%s", cg.oomKills(), logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(time.Since(started).Seconds(), "start-to-ready-s")
		workers := scrape(addr)["auditor_render_workers_total"]
		blameStart := time.Now()
		q := url.Values{"env": {"prod"}, "kind": {"deployment"}, "namespace": {"llm-inference"}, "name": {"vllm-qwen"}}
		resp, err := http.Get("http://" + addr + "/api/v1/blame?" + q.Encode())
		if err != nil {
			b.Fatalf("blame: %v (OOM kills: %v)\n%s", err, cg.oomKills(), logs.String())
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("blame: %s\n%s", resp.Status, logs.String())
		}
		walked := scrape(addr)["auditor_render_workers_total"] - workers
		if walked <= 0 {
			b.Fatalf("the blame walk started no render worker:\n%s", logs.String())
		}
		b.ReportMetric(time.Since(blameStart).Seconds(), "blame-s")
		b.ReportMetric(walked, "blame-render-workers")
		// A change and its promotion to prod (the release file's pin moved to it): the next fetch,
		// within a minute, brings prod a new revision, rendered in a worker and audited in full,
		// counted from the daemon's own metrics.
		const fullAudits = `auditor_audits_total{mode="full"}`
		want, deadline := scrape(addr)[fullAudits]+1, time.Now().Add(4*time.Minute)
		rendered := scrape(addr)["auditor_render_workers_total"]
		work := gittest.Clone(b, filepath.Join(repos, "platform.git"))
		appendFile(b, filepath.Join(work, "overlays", "prod", "kustomization.yaml"), "# a new revision\n")
		gittest.Run(b, work, "commit", "-qam", "prod: a comment")
		release := filepath.Join(work, "apps", "prod", "release.yaml")
		pin, err := os.ReadFile(release)
		if err != nil {
			b.Fatal(err)
		}
		head := strings.TrimSpace(gittest.Run(b, work, "rev-parse", "HEAD"))
		moved := regexp.MustCompile(`(?m)^  revision: .*$`).ReplaceAll(pin, []byte("  revision: "+head))
		if err := os.WriteFile(release, moved, 0o644); err != nil {
			b.Fatal(err)
		}
		gittest.Run(b, work, "commit", "-qam", "prod: promote")
		gittest.Run(b, work, "push", "-q", "origin", "HEAD:main")
		for scrape(addr)[fullAudits] < want || scrape(addr)["auditor_render_workers_total"] <= rendered {
			if time.Now().After(deadline) {
				b.Fatalf("the pushed revision was not rendered and audited in 4m:\n%s", logs.String())
			}
			time.Sleep(time.Second)
		}
		samples := mem.finish()
		b.ReportMetric(scrape(addr)["auditor_render_workers_total"], "render-workers")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		b.ReportMetric(float64(limit)/(1<<20), "limit-MiB")
		b.ReportMetric(cg.peak()/(1<<20), "container-peak-MiB")
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.workingSet }), "container-working-set-max-MiB")
		b.ReportMetric(stat(samples, 50, func(m memSample) float64 { return m.workingSet }), "container-working-set-p50-MiB")
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.daemon }), "daemon-RSS-max-MiB")
		b.ReportMetric(stat(samples, 100, func(m memSample) float64 { return m.workers }), "worker-RSS-max-MiB")
		b.ReportMetric(float64(len(res.Objects)), "objects")
		kills := cg.oomKills()
		cg.remove()
		if kills > 0 {
			b.Fatalf("%v OOM kills under the shipped limit of %d MiB", kills, limit>>20)
		}
	}
}

// auditorMemoryLimit is limits.memory of the auditor StatefulSet's container among objs, in bytes.
func auditorMemoryLimit(b *testing.B, objs []*unstructured.Unstructured) int64 {
	b.Helper()
	for _, o := range objs {
		if o.GetKind() != "StatefulSet" || o.GetName() != "auditor" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			c := c.(map[string]any)
			if c["name"] != "auditor" {
				continue
			}
			s, _, _ := unstructured.NestedString(c, "resources", "limits", "memory")
			q, err := resource.ParseQuantity(s)
			if err != nil {
				b.Fatalf("auditor's limits.memory %q: %v", s, err)
			}
			return q.Value()
		}
	}
	b.Fatal("prod renders no auditor StatefulSet with a memory limit")
	return 0
}
