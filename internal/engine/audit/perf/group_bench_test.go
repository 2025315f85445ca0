package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

const (
	groupEnv     = "group20"
	groupApps    = 20  // Applications under the root
	groupObjects = 500 // per Application: its Namespace and 499 ConfigMaps
	groupRounds  = 10  // audits of each kind, and hard refreshes of every Application by Argo CD
)

// BenchmarkGroupOf20ApplicationsOf500Objects times, in one run over the same env, the auditor
// and Argo CD itself on an env of 20 Applications of 500 objects each (10,000 objects) under a
// root: the app-of-apps root-group20, applied by hand from clusters/group20/root.yaml, whose path
// apps/group20 declares the 20 Applications, each a plain directory of its Namespace and 499
// ConfigMaps. Real Argo CD — the test cluster's application controller and repo-server, as it
// configures them (server-side diff on; every Application compared with Git every 10 s, where a
// default install waits 2 to 3 minutes), in a cluster of this benchmark's own, since the
// package's runs no Argo CD — syncs the root and the 20 Applications from a Git repository it
// reads over file:// (automated sync, prune on, selfHeal off so hand edits stand, server-side
// apply). Every figure is taken once all 21 are Synced and Healthy at the repository's head
// (argocd-initial-sync-s: from the root applied to that, polled every second). Then 10 rounds,
// each of the following one after another, never two at once:
//
//   - audit-p50-ms, audit-p99-ms: `auditor diff --env group20 -o json --cache-dir=off`, the CLI
//     process a user runs, with the kubeconfig, from start to exit: Git read, the 21 renders, list
//     and watch of the live objects, the cluster's schema, the comparison, Argo CD's verdict, the
//     JSON report. Each must report the root and the 20 Applications, every one audited, 500
//     objects each, and no drifted object. audit-cpu-s is its CPU time (user + system, its render
//     workers included), the mean of the 10.
//   - audit-cached-p50-ms, audit-cached-p99-ms: the same with a render cache directory (the CLI's
//     default is one under the user's cache directory), filled by one run before the rounds: what
//     a user's next `auditor diff` of the same revision pays.
//   - Argo CD's own refresh of the same Applications: the 21 annotated
//     argocd.argoproj.io/refresh=hard at once (what `argocd app get --hard-refresh` asks), the
//     round ending when the controller has removed every annotation and logged each one's
//     "Reconciliation completed" at comparison level 3 (Git resolved again, manifests generated
//     again by the repo-server, the server-side diff of its 500 objects). The controller runs
//     them side by side (its status processors) on the machine's cores, so each one's duration
//     includes waiting for the CPU the others take. argocd-hard-refresh-p50-ms, -p99-ms: the
//     time_ms the controller logs for those 210 reconciles (exact). argocd-reconcile-p50-ms,
//     -p99-ms, -mean-ms: its own histogram argocd_app_reconcile on its /metrics, the increase
//     over the rounds' windows, which counts every reconcile ended in them (argocd-reconciles:
//     the hard refreshes and the periodic and event-driven ones); the percentiles are
//     interpolated in its buckets (0.25 to 16 s) as Prometheus' histogram_quantile does — one
//     beyond the highest bucket reads 16000, a lower bound — the mean is exact (sum/count).
//     argocd-refresh-all-s: from the first annotation to the round's end, the p50 of the 10.
//     argocd-refresh-cpu-s: the CPU time of the controller and the repo-server (its git and
//     other children included) in a round, the mean.
//
// Argo CD's periodic reconciles (every 10 s) run throughout, beside the auditor's audits too.
//
// Then edit-to-chat-p50-ms, edit-to-chat-p99-ms: `auditor serve` (every tuning knob at its
// default: 10 s fold window, 1 m Git fetch, 5 m resync), with a Slack-compatible webhook on
// loopback, started once the rounds are over (daemon-start-to-ready-s: process start to
// /readyz, its first full audit of the group included). Twenty hand edits with the real kubectl
// (`kubectl patch configmap`, a value of data.model), each in another of the 20 Applications,
// each timed from the moment a watch of the benchmark's own receives it (the API server has
// stored the edit and sent it to its watchers, the daemon's among them) to the arrival of the
// chat message that names the edited ConfigMap; the next edit waits 10.5 s after that message,
// past the fold window the message opened (an edit inside it is folded into the window's digest
// by design). An edit that lands while the daemon fetches Git or audits the group in full waits
// for it, and counts. The run fails unless a final `auditor diff` reports exactly the 20 edited
// ConfigMaps, each Modified under its Application. The edits are then put back to Git's value
// (kubectl), so that another iteration starts in sync.
//
// p99 of 10 (or 20) samples is, by nearest rank, the slowest one. The log lists every sample,
// and for each edit what the daemon audited between the edit and its message.
//
//	go test ./internal/engine/audit/perf -run '^$' -bench BenchmarkGroupOf20 -benchtime 1x -timeout 60m
func BenchmarkGroupOf20ApplicationsOf500Objects(b *testing.B) {
	testcluster.Need(b)
	bin := auditorBinary(b) // built before the cluster starts: the build does not slow Argo CD's sync
	c := startArgoCluster(b)
	ctx := context.Background()
	dyn, err := c.Dynamic()
	if err != nil {
		b.Fatal(err)
	}
	dir, apps := writeGroupRepo(b)
	head := strings.TrimSpace(string(gitOut(b, dir, "rev-parse", "HEAD")))
	root := "root-" + groupEnv
	all := append([]string{root}, apps...)

	applied := time.Now()
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(dir, "clusters", groupEnv, "root.yaml")).CombinedOutput(); err != nil {
		b.Fatalf("kubectl apply root: %v\n%s", err, out)
	}
	if err := waitApps(ctx, dyn, all, 30*time.Minute, func(u *unstructured.Unstructured) string { return syncedAt(u, head) }); err != nil {
		b.Fatalf("Argo CD did not sync the group: %v\n%s", err, tailLog(filepath.Join(c.Dir, "argocd-application-controller.log"), 30))
	}
	initialSync := time.Since(applied)
	b.Logf("Argo CD synced the root and %d Applications of %d objects in %s", groupApps, groupObjects, initialSync.Round(time.Second))

	ctrlPid, repoPid := pidOf(b, c, "argocd-application-controller"), pidOf(b, c, "argocd-repo-server")
	ctrlLog := filepath.Join(c.Dir, "argocd-application-controller.log")
	env := append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cacheDir := b.TempDir()
	// auditorDiff runs `auditor diff` and checks its report: every Application audited, none drifted,
	// or (edited) exactly the ConfigMaps edited, Modified.
	auditorDiff := func(cache string, edited map[string]string) (time.Duration, time.Duration) {
		cmd := exec.Command(bin, "diff", "--env", groupEnv, "--repo", dir, "-o", "json", "--cache-dir="+cache)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		out, err := cmd.Output()
		took := time.Since(start)
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			b.Fatalf("auditor diff: %v\n%s", err, stderr.String())
		}
		checkGroupReport(b, out, root, apps, edited)
		return took, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}

	var cold, cached, refreshAll, hardRefresh []time.Duration
	var auditCPU time.Duration
	var refreshCPU float64
	var reconciles histogram
	var daemonReady time.Duration
	var toChat []time.Duration
	for b.Loop() {
		auditorDiff(cacheDir, nil) // fills the render cache the cached audits read
		for range groupRounds {
			took, cpu := auditorDiff("off", nil)
			cold, auditCPU = append(cold, took), auditCPU+cpu
			took, _ = auditorDiff(cacheDir, nil)
			cached = append(cached, took)

			cpu0 := procCPU(ctrlPid) + procCPU(repoPid)
			before := argoReconcileHistogram(scrape(c.ArgoCDMetrics))
			took, logged := hardRefreshAll(b, ctx, dyn, all, ctrlLog)
			after := argoReconcileHistogram(scrape(c.ArgoCDMetrics))
			refreshCPU += procCPU(ctrlPid) + procCPU(repoPid) - cpu0
			refreshAll = append(refreshAll, took)
			hardRefresh = append(hardRefresh, logged...)
			reconciles = reconciles.plus(after.minus(before))
			// Argo CD's verdict after its hard refresh agrees: every Application still Synced.
			if err := waitApps(ctx, dyn, all, time.Minute, func(u *unstructured.Unstructured) string { return syncedAt(u, head) }); err != nil {
				b.Fatalf("after Argo CD's hard refresh: %v", err)
			}
		}
		ready, lat := editsToChat(b, bin, c, dir, apps)
		daemonReady, toChat = ready, append(toChat, lat...)
		edited := map[string]string{}
		for _, app := range apps {
			edited[app+"/"+editedConfigMap] = app
		}
		auditorDiff("off", edited)
		for _, app := range apps { // Git's value again, for another iteration
			if out, err := c.Kubectl(ctx, "-n", app, "patch", "configmap", editedConfigMap, "--type=merge",
				`-p={"data":{"model":"`+editedConfigMap+`"}}`).CombinedOutput(); err != nil {
				b.Fatalf("kubectl patch: %v\n%s", err, out)
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.Logf("auditor diff: %v; cached: %v", sorted(cold), sorted(cached))
	b.Logf("Argo CD: hard refresh of all %d Applications, round by round: %v; argocd_app_reconcile over those windows: %.0f reconciles, buckets %v",
		len(all), roundAll(refreshAll), reconciles.count, reconciles.buckets)
	b.ReportMetric(ms(pct(cold, 50)), "audit-p50-ms")
	b.ReportMetric(ms(pct(cold, 99)), "audit-p99-ms")
	b.ReportMetric(auditCPU.Seconds()/float64(len(cold)), "audit-cpu-s")
	b.ReportMetric(ms(pct(cached, 50)), "audit-cached-p50-ms")
	b.ReportMetric(ms(pct(cached, 99)), "audit-cached-p99-ms")
	b.ReportMetric(ms(pct(toChat, 50)), "edit-to-chat-p50-ms")
	b.ReportMetric(ms(pct(toChat, 99)), "edit-to-chat-p99-ms")
	b.ReportMetric(daemonReady.Seconds(), "daemon-start-to-ready-s")
	b.ReportMetric(ms(pct(hardRefresh, 50)), "argocd-hard-refresh-p50-ms")
	b.ReportMetric(ms(pct(hardRefresh, 99)), "argocd-hard-refresh-p99-ms")
	b.ReportMetric(reconciles.quantile(0.5)*1000, "argocd-reconcile-p50-ms")
	b.ReportMetric(reconciles.quantile(0.99)*1000, "argocd-reconcile-p99-ms")
	b.ReportMetric(reconciles.sum/reconciles.count*1000, "argocd-reconcile-mean-ms")
	b.ReportMetric(reconciles.count, "argocd-reconciles")
	b.ReportMetric(pct(refreshAll, 50).Seconds(), "argocd-refresh-all-s")
	b.ReportMetric(refreshCPU/float64(len(refreshAll)), "argocd-refresh-cpu-s")
	b.ReportMetric(initialSync.Seconds(), "argocd-initial-sync-s")
	b.ReportMetric(float64(len(all)), "applications")
	b.ReportMetric(groupApps*groupObjects, "objects")
}

// sorted is ds sorted and rounded to the millisecond, for the log.
func sorted(ds []time.Duration) []time.Duration { return roundAll(slices.Sorted(slices.Values(ds))) }

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// editedConfigMap is the ConfigMap edited by hand in each Application.
const editedConfigMap = "cm-00007"

// startArgoCluster starts a cluster of the benchmark's own with Argo CD (the package's runs
// without it: Argo CD would reconcile the other benchmarks' Applications and load their figures).
func startArgoCluster(b *testing.B) *testcluster.Cluster {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := testcluster.Start(ctx, testcluster.Options{ArgoCD: true})
	if err != nil {
		if errors.Is(err, testcluster.ErrNoBinaries) && os.Getenv(testcluster.EnvVar) != "required" {
			b.Skipf("needs Argo CD's binaries, skipped: %v", err)
		}
		b.Fatalf("start a cluster with Argo CD: %v", err)
	}
	b.Cleanup(c.Stop)
	b.Logf("cluster with Argo CD %s ready in %s", testcluster.ArgoCDVersion, time.Since(start).Round(100*time.Millisecond))
	return c
}

// writeGroupRepo writes the env's Git repository: the root's manifest clusters/<env>/root.yaml,
// apps/<env> declaring the Applications, each one's plain directory workloads/<app> (its
// Namespace and 499 ConfigMaps in files of 50), and an empty overlays/<env> (the CLI knows an
// env by its overlay; the root does not declare it). It returns the directory and the
// Applications' names.
func writeGroupRepo(b *testing.B) (string, []string) {
	b.Helper()
	dir := b.TempDir()
	repoURL := "file://" + dir
	write := func(rel string, obj any) {
		var data []byte
		switch o := obj.(type) {
		case string:
			data = []byte(o)
		default:
			var err error
			if data, err = yaml.Marshal(o); err != nil {
				b.Fatal(err)
			}
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var apps []string
	for i := range groupApps {
		app := fmt.Sprintf("%s-app-%02d", groupEnv, i)
		apps = append(apps, app)
		write(filepath.Join("apps", groupEnv, app+".yaml"), map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": app, "namespace": testcluster.ArgoCDNamespace,
				"finalizers": []any{"resources-finalizer.argocd.argoproj.io"}},
			"spec": map[string]any{
				"project":     "default",
				"source":      map[string]any{"repoURL": repoURL, "targetRevision": "main", "path": "workloads/" + app},
				"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": app},
				"syncPolicy": map[string]any{"automated": map[string]any{"prune": true, "selfHeal": false},
					"syncOptions": []any{"ServerSideApply=true"}},
			},
		})
		write(filepath.Join("workloads", app, "namespace.yaml"), map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": app}})
		var doc strings.Builder
		for j := 1; j < groupObjects; j++ {
			name := fmt.Sprintf("cm-%05d", j)
			fmt.Fprintf(&doc, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {app.kubernetes.io/part-of: llm-platform}\ndata:\n  model: %s\n  maxTokens: \"8192\"\n  gpu: l40s\n", name, app, name)
			if j%50 == 0 || j == groupObjects-1 {
				write(filepath.Join("workloads", app, fmt.Sprintf("configmaps-%02d.yaml", (j-1)/50)), doc.String())
				doc.Reset()
			}
		}
	}
	write(filepath.Join("clusters", groupEnv, "root.yaml"), map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "root-" + groupEnv, "namespace": testcluster.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": repoURL, "targetRevision": "main", "path": "apps/" + groupEnv},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": testcluster.ArgoCDNamespace},
			"syncPolicy": map[string]any{"automated": map[string]any{"prune": false, "selfHeal": false},
				"syncOptions": []any{"ServerSideApply=true"}},
		},
	})
	write(filepath.Join("overlays", groupEnv, "kustomization.yaml"), "# the env's overlay: empty, the root declares the env's Applications\nresources: []\n")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-qm", "a root over 20 Applications of 500 objects"}} {
		gitIn(b, dir, args...)
	}
	return dir, apps
}

func gitOut(b *testing.B, dir string, args ...string) []byte {
	b.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		b.Fatalf("git %v: %v", args, err)
	}
	return out
}

// syncedAt is "" when Argo CD has synced the Application u to rev, its last operation succeeded
// and it is Healthy; else what it is.
func syncedAt(u *unstructured.Unstructured, rev string) string {
	st, _, _ := unstructured.NestedString(u.Object, "status", "sync", "status")
	syncRev, _, _ := unstructured.NestedString(u.Object, "status", "sync", "revision")
	health, _, _ := unstructured.NestedString(u.Object, "status", "health", "status")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
	if st == "Synced" && syncRev == rev && health == "Healthy" && phase == "Succeeded" {
		return ""
	}
	msg, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "message")
	return fmt.Sprintf("%s at %.8s, %s, operation %s (%.200s)", st, syncRev, health, phase, msg)
}

// waitApps polls the Applications names every second until state says "" of each.
func waitApps(ctx context.Context, dyn dynamic.Interface, names []string, timeout time.Duration, state func(*unstructured.Unstructured) string) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := dyn.Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).List(ctx, metav1.ListOptions{})
		var waiting []string
		if err != nil {
			waiting = append(waiting, err.Error())
		} else {
			byName := map[string]*unstructured.Unstructured{}
			for i := range list.Items {
				byName[list.Items[i].GetName()] = &list.Items[i]
			}
			for _, n := range names {
				if u := byName[n]; u == nil {
					waiting = append(waiting, n+": absent")
				} else if s := state(u); s != "" {
					waiting = append(waiting, n+": "+s)
				}
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, %d of %d Applications: %s", timeout, len(waiting), len(names), strings.Join(waiting, "; "))
		}
		time.Sleep(time.Second)
	}
}

// checkGroupReport fails unless an `auditor diff -o json` report of the group lists the root and
// every Application audited (500 objects each) and its drifted objects are exactly edited
// (namespace/name → Application), each a Modified ConfigMap.
func checkGroupReport(b *testing.B, out []byte, root string, apps []string, edited map[string]string) {
	b.Helper()
	var rep drift.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		b.Fatalf("auditor diff output: %v\n%.2000s", err, out)
	}
	byName := map[string]drift.Application{}
	for _, a := range rep.Applications {
		byName[a.Name] = a
	}
	if len(rep.Applications) != len(apps)+1 {
		b.Fatalf("auditor diff audited %d Applications, want the root and %d: %+v", len(rep.Applications), len(apps), rep.Applications)
	}
	for _, name := range append([]string{root}, apps...) {
		a, ok := byName[name]
		switch {
		case !ok:
			b.Fatalf("auditor diff did not audit %s: %+v", name, rep.Applications)
		case a.Error != "":
			b.Fatalf("auditor diff could not audit %s: %s", name, a.Error)
		case name != root && a.Objects != groupObjects:
			b.Fatalf("auditor diff audited %d objects of %s, want %d", a.Objects, name, groupObjects)
		case name == root && a.Objects < len(apps):
			b.Fatalf("auditor diff audited %d objects of the root, want its %d Applications", a.Objects, len(apps))
		}
	}
	got := map[string]string{}
	for _, o := range rep.Objects {
		if o.Kind != "ConfigMap" || o.Status != drift.Modified {
			b.Fatalf("auditor diff reports %s %s/%s %s (of %s), want no drift but the edited ConfigMaps", o.Kind, o.Namespace, o.Name, o.Status, o.Application)
		}
		got[o.Namespace+"/"+o.Name] = o.Application
	}
	if len(got) != len(edited) {
		b.Fatalf("auditor diff reports %d drifted objects, want %d: %v", len(got), len(edited), got)
	}
	for k, app := range edited {
		if got[k] != app {
			b.Fatalf("auditor diff reports %s under %q, want Modified under %s", k, got[k], app)
		}
	}
}

// hardRefreshAll asks Argo CD for a hard refresh of every Application names, all at once, and
// returns once its controller has done each one: it has removed the annotation and logged the
// reconcile's "Reconciliation completed" at comparison level 3. It returns the time from the
// first annotation to then, and the durations the controller logged for those reconciles.
func hardRefreshAll(b *testing.B, ctx context.Context, dyn dynamic.Interface, names []string, ctrlLog string) (time.Duration, []time.Duration) {
	b.Helper()
	offset := fileSize(ctrlLog)
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"hard"}}}`)
	start := time.Now()
	for _, n := range names {
		if _, err := dyn.Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).Patch(ctx, n, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: "argocd-server"}); err != nil {
			b.Fatal(err)
		}
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	deadline := start.Add(10 * time.Minute)
	for {
		logged := reconcilesLogged(ctrlLog, offset, want)
		if len(logged) == len(names) {
			err := waitApps(ctx, dyn, names, time.Minute, func(u *unstructured.Unstructured) string {
				if _, ok := u.GetAnnotations()["argocd.argoproj.io/refresh"]; ok {
					return "refresh annotation still set"
				}
				return ""
			})
			if err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			var ds []time.Duration
			for _, d := range logged {
				ds = append(ds, d)
			}
			return took, ds
		}
		if time.Now().After(deadline) {
			b.Fatalf("Argo CD did not hard-refresh every Application in 10m: %d of %d done\n%s", len(logged), len(names), tailLog(ctrlLog, 30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	reconcileLine = regexp.MustCompile(`msg="Reconciliation completed"`)
	logField      = regexp.MustCompile(`(?:^| )(application|comparison-level|time_ms)=("[^"]*"|\S+)`)
)

// reconcilesLogged reads the controller's log from offset: the duration of the first
// "Reconciliation completed" at comparison level 3 (CompareWithLatestForceResolve, as a
// requested refresh is) of each Application in want.
func reconcilesLogged(file string, offset int64, want map[string]bool) map[string]time.Duration {
	out := map[string]time.Duration{}
	f, err := os.Open(file)
	if err != nil {
		return out
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return out
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !reconcileLine.MatchString(line) {
			continue
		}
		fields := map[string]string{}
		for _, m := range logField.FindAllStringSubmatch(line, -1) {
			fields[m[1]] = strings.Trim(m[2], `"`)
		}
		app := fields["application"]
		if !want[app] || fields["comparison-level"] != "3" {
			continue
		}
		if _, ok := out[app]; ok {
			continue
		}
		if ms, err := strconv.Atoi(fields["time_ms"]); err == nil {
			out[app] = time.Duration(ms) * time.Millisecond
		}
	}
	return out
}

func fileSize(file string) int64 {
	st, err := os.Stat(file)
	if err != nil {
		return 0
	}
	return st.Size()
}

// tailLog is the last n lines of a log file.
func tailLog(file string, n int) string {
	data, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// pidOf is the pid of one of the cluster's processes (its pid file).
func pidOf(b *testing.B, c *testcluster.Cluster, name string) int {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(c.Dir, name+".pid"))
	if err != nil {
		b.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		b.Fatal(err)
	}
	return pid
}

// procCPU is a process' CPU seconds, its waited-for children's included.
func procCPU(pid int) float64 { own, reaped := cpuSeconds(pid); return own + reaped }

// histogram is a Prometheus histogram: cumulative counts by upper bound (+Inf included), sum,
// count.
type histogram struct {
	buckets    map[float64]float64
	sum, count float64
}

// argoReconcileHistogram is argocd_app_reconcile from scraped series, its label sets added up.
func argoReconcileHistogram(m map[string]float64) histogram {
	h := histogram{buckets: map[float64]float64{}}
	le := regexp.MustCompile(`le="([^"]+)"`)
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "argocd_app_reconcile_bucket{"):
			if sm := le.FindStringSubmatch(k); sm != nil {
				if bound, err := strconv.ParseFloat(sm[1], 64); err == nil {
					h.buckets[bound] += v
				}
			}
		case strings.HasPrefix(k, "argocd_app_reconcile_sum"):
			h.sum += v
		case strings.HasPrefix(k, "argocd_app_reconcile_count"):
			h.count += v
		}
	}
	return h
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{buckets: map[float64]float64{}, sum: h.sum - o.sum, count: h.count - o.count}
	for k, v := range h.buckets {
		out.buckets[k] = v - o.buckets[k]
	}
	return out
}

func (h histogram) plus(o histogram) histogram {
	out := histogram{buckets: map[float64]float64{}, sum: h.sum + o.sum, count: h.count + o.count}
	for k, v := range h.buckets {
		out.buckets[k] += v
	}
	for k, v := range o.buckets {
		out.buckets[k] += v
	}
	return out
}

// quantile is the q-quantile as Prometheus' histogram_quantile estimates it: linear within the
// bucket the rank falls in; the highest finite bound when it falls beyond it.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	bounds := make([]float64, 0, len(h.buckets))
	for k := range h.buckets {
		bounds = append(bounds, k)
	}
	slices.Sort(bounds)
	rank := q * h.count
	lower, below := 0.0, 0.0
	for _, upper := range bounds {
		n := h.buckets[upper]
		if n >= rank {
			if math.IsInf(upper, 1) {
				return lower
			}
			if n == below {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/(n-below)
		}
		lower, below = upper, n
	}
	return lower
}

// chatLog is a Slack-compatible webhook that keeps each message and when it arrived.
type chatLog struct {
	mu   sync.Mutex
	at   []time.Time
	body []string
}

func (c *chatLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	now := time.Now()
	c.mu.Lock()
	c.at, c.body = append(c.at, now), append(c.body, string(data))
	c.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (c *chatLog) count() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.at) }

// naming is when the first message from the from-th on that contains s arrived, with its body.
func (c *chatLog) naming(from int, s string) (time.Time, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := from; i < len(c.at); i++ {
		if strings.Contains(c.body[i], s) {
			return c.at[i], c.body[i], true
		}
	}
	return time.Time{}, "", false
}

// editsToChat runs `auditor serve` over the env and times one hand edit in each Application, from
// the API server's watch event of it to the chat message naming it. It returns the daemon's
// start-to-ready time and the latencies, in the order of the edits.
func editsToChat(b *testing.B, bin string, c *testcluster.Cluster, dir string, apps []string) (time.Duration, []time.Duration) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chat := &chatLog{}
	srv := httptest.NewServer(chat)
	defer srv.Close()
	state := b.TempDir()
	urlFile := filepath.Join(state, "slack-url")
	if err := os.WriteFile(urlFile, []byte(srv.URL+"/services/T0/B0/X"), 0o600); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	cfgFile := writeConfig(b, state, map[string]any{ // only what locates things; every tuning knob at its default
		"repo": dir, "envs": []string{groupEnv}, "kubeconfig": c.Kubeconfig, "stateDir": filepath.Join(state, "state"),
		"listen": addr, "api": map[string]any{"auth": "none"},
		"sinks": []any{map[string]any{"name": "slack", "slack": map[string]any{"urlFile": urlFile}}},
	})
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "serve", "--config", cfgFile)
	cmd.Stdout, cmd.Stderr = logs, logs
	started := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	for !ready(addr) {
		if time.Since(started) > 10*time.Minute {
			b.Fatalf("daemon not ready after 10m:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	readyIn := time.Since(started)
	b.Logf("auditor serve ready in %s; %d messages so far", readyIn.Round(time.Millisecond), chat.count())
	const value = "edited-by-hand"
	dyn, err := c.Dynamic()
	if err != nil {
		b.Fatal(err)
	}
	seen := watchEdits(b, ctx, dyn, value)
	audits := func() (float64, float64) {
		m := scrape(addr)
		return m[`auditor_audits_total{mode="full"}`], m[`auditor_audits_total{mode="incremental"}`]
	}
	var out []time.Duration
	var notes []string
	for i, app := range apps {
		from := chat.count()
		full0, incr0 := audits()
		kubectl := c.Kubectl(ctx, "-n", app, "patch", "configmap", editedConfigMap, "--type=merge", `-p={"data":{"model":"`+value+`"}}`)
		if o, err := kubectl.CombinedOutput(); err != nil {
			b.Fatalf("kubectl patch: %v\n%s", err, o)
		}
		returned := time.Now()
		for {
			at, body, ok := chat.naming(from, app+"/"+editedConfigMap)
			stored, watched := seen.at(app)
			if ok && watched {
				out = append(out, at.Sub(stored))
				full, incr := audits()
				notes = append(notes, fmt.Sprintf("%s (since the edit: %.0f full audits of the group, %.0f incremental audits)",
					at.Sub(stored).Round(time.Millisecond), full-full0, incr-incr0))
				if i == 0 {
					b.Logf("first message: %.600s", body)
				}
				break
			}
			if time.Since(returned) > 90*time.Second {
				b.Fatalf("edit %d (%s): after 90s, message naming it %v, watch event %v (%d messages since)\n%s", i+1, app, ok, watched, chat.count()-from, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(10*time.Second + 500*time.Millisecond) // past the fold window the message opened
	}
	b.Logf("edit to chat, in the order of the edits: %s", strings.Join(notes, "; "))
	return readyIn, out
}

// editWatch records when a watch of the edited ConfigMaps first saw each one (by namespace) take
// the edited value.
type editWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (w *editWatch) at(ns string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.seen[ns]
	return t, ok
}

// watchEdits watches the ConfigMaps named editedConfigMap in every namespace until ctx ends,
// from now on: it returns once the watch is open.
func watchEdits(b *testing.B, ctx context.Context, dyn dynamic.Interface, value string) *editWatch {
	b.Helper()
	cms := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + editedConfigMap}
	list, err := cms.List(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	opts.ResourceVersion = list.GetResourceVersion()
	w, err := cms.Watch(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	ew := &editWatch{seen: map[string]time.Time{}}
	go func() {
		for {
			for ev := range w.ResultChan() {
				now := time.Now()
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok { // an error event (the resource version too old): go on from a new list
					if l, err := cms.List(ctx, metav1.ListOptions{FieldSelector: opts.FieldSelector}); err == nil {
						opts.ResourceVersion = l.GetResourceVersion()
					}
					continue
				}
				opts.ResourceVersion = u.GetResourceVersion()
				if v, _, _ := unstructured.NestedString(u.Object, "data", "model"); v == value {
					ew.mu.Lock()
					if _, ok := ew.seen[u.GetNamespace()]; !ok {
						ew.seen[u.GetNamespace()] = now
					}
					ew.mu.Unlock()
				}
			}
			if ctx.Err() != nil {
				return
			}
			if w, err = cms.Watch(ctx, opts); err != nil { // closed by the server: go on from the last event
				return
			}
		}
	}()
	return ew
}
