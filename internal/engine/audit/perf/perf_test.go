// Package perf holds the drift engine's benchmarks against a real API server: a full audit of
// 1,000 and 10,000 live objects after cache sync (also followed by naming the person behind each
// drifted field from 10 audit events held per object), `kubectl diff --server-side` over the
// same 1,000 objects in the same run, and the memory the watch cache takes at 10,000 objects.
//
//	make bench   or   go test -run '^$' -bench . -benchtime 5x ./internal/engine/audit/perf
package perf

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // no benchmark asked for: no cluster needed
	}
	// With CRDs (the end-to-end diff reads an Application) and the Deployment controller alone:
	// it writes each Deployment's revision annotation after its rollout, as on a real cluster,
	// and makes ReplicaSets, whose controller does not run (no pods).
	code := testcluster.Main(m, testcluster.Options{ControllerManager: true, Controllers: []string{"deployment"}}, &cluster)
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath)) // the auditor built for the benchmarks (~165 MB)
	}
	os.Exit(code)
}

// corpus generates n desired objects across 10 namespaces: 40 % Deployments with a GPU pod
// template, 30 % Services, 30 % ConfigMaps, named so that a prefix selects a stable subset.
func corpus(prefix string, n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, n)
	for i := range n {
		ns := fmt.Sprintf("%s-ns-%d", prefix, i%10)
		name := fmt.Sprintf("obj-%05d", i)
		var doc string
		switch i % 10 {
		case 0, 1, 2, 3:
			doc = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s, labels: {app: %[1]s, app.kubernetes.io/part-of: llm-platform}}
spec:
  replicas: 2
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]
      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: accelerator, operator: In, values: [l40s]}]}]}}}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args: [--served-model-name=%[1]s, --max-model-len=8192]
        ports: [{containerPort: 8000, name: http}]
        env: [{name: HF_HOME, value: /models}]
        resources: {limits: {nvidia.com/gpu: "1", cpu: 4000m, memory: 32Gi}, requests: {nvidia.com/gpu: "1", cpu: "2", memory: 32768Mi}}
`, name, ns)
		case 4, 5, 6:
			doc = fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  selector: {app: %[1]s}
  ports: [{name: http, port: 8000, targetPort: http}]
`, name, ns)
		default:
			doc = fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: %[1]s, namespace: %[2]s}
data: {model: %[1]s, maxTokens: "8192"}
`, name, ns)
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			panic(err)
		}
		u := &unstructured.Unstructured{}
		data, _ := yaml.YAMLToJSON([]byte(doc))
		_ = u.UnmarshalJSON(data)
		out = append(out, u)
	}
	return out
}

var (
	setupMu sync.Mutex
	synced  = map[string]bool{}
)

// ensure applies the corpus as argocd-controller (8 workers) and drifts every 100th Deployment
// with a scale by another manager, once per prefix.
func ensure(b *testing.B, prefix string, objs []*unstructured.Unstructured) {
	b.Helper()
	ensureOn(b, cluster, prefix, objs)
}

// ensureOn is ensure on the cluster c.
func ensureOn(b *testing.B, c *testcluster.Cluster, prefix string, objs []*unstructured.Unstructured) {
	b.Helper()
	setupMu.Lock()
	defer setupMu.Unlock()
	if synced[prefix] {
		return
	}
	ctx := context.Background()
	syncer, err := testcluster.NewSyncer(c.Config)
	if err != nil {
		b.Fatal(err)
	}
	var nss []*unstructured.Unstructured
	for i := range 10 {
		nss = append(nss, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-ns-%d", prefix, i)}}})
	}
	if err := syncer.Sync(ctx, "bench", nss, false); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	applyAll(b, objs, func(o *unstructured.Unstructured) error {
		return syncer.Sync(ctx, "bench", []*unstructured.Unstructured{o}, false)
	})
	for i := 0; i < len(objs); i += 100 {
		o := objs[i]
		out, err := c.Kubectl(ctx, "-n", o.GetNamespace(), "scale", "deployment/"+o.GetName(), "--replicas=5").CombinedOutput()
		if err != nil {
			b.Fatalf("kubectl scale: %v\n%s", err, out)
		}
	}
	b.Logf("created %d objects in %s", len(objs), time.Since(start).Round(time.Millisecond))
	synced[prefix] = true
}

// ensureBare applies the corpus as most users' manifests are written and applied: no
// annotations at all, server-side as argocd-controller with no tracking annotation or label;
// then edits every 100th Deployment's image with kubectl set image, and waits until the
// Deployment controller has written its revision annotation on every Deployment.
func ensureBare(b *testing.B, prefix string, objs []*unstructured.Unstructured) {
	b.Helper()
	setupMu.Lock()
	defer setupMu.Unlock()
	if synced[prefix] {
		return
	}
	ctx := context.Background()
	syncer, err := testcluster.NewSyncer(cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-ns-%d", prefix, i)}}}
		if err := syncer.ApplyAs(ctx, ns, testcluster.ArgoManager); err != nil {
			b.Fatal(err)
		}
	}
	applyAll(b, objs, func(o *unstructured.Unstructured) error { return syncer.ApplyAs(ctx, o, testcluster.ArgoManager) })
	deployments := 0
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			deployments++
		}
	}
	for i := 0; i < len(objs); i += 100 {
		o := objs[i]
		out, err := cluster.Kubectl(ctx, "-n", o.GetNamespace(), "set", "image", "deployment/"+o.GetName(), "vllm=vllm/vllm-openai:v0.11.1").CombinedOutput()
		if err != nil {
			b.Fatalf("kubectl set image: %v\n%s", err, out)
		}
	}
	cs, err := cluster.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		annotated := 0
		for i := range 10 {
			list, err := cs.AppsV1().Deployments(fmt.Sprintf("%s-ns-%d", prefix, i)).List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range list.Items {
				if d.Annotations["deployment.kubernetes.io/revision"] != "" {
					annotated++
				}
			}
		}
		if annotated == deployments {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the Deployment controller annotated %d of %d Deployments", annotated, deployments)
		}
		time.Sleep(time.Second)
	}
	synced[prefix] = true
}

// applyAll runs apply on every object, 8 at a time, failing at the first error.
func applyAll(b *testing.B, objs []*unstructured.Unstructured, apply func(*unstructured.Unstructured) error) {
	b.Helper()
	work := make(chan *unstructured.Unstructured)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for o := range work { // go on reading after an error: the sender never blocks
				if err := apply(o); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

func syncedCache(b *testing.B) *live.Cache {
	b.Helper()
	ctx := context.Background()
	cache, err := live.New(ctx, cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	kinds := []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ConfigMap"}}
	if err := cache.Watch(ctx, kinds, nil); err != nil {
		b.Fatal(err)
	}
	return cache
}

// benchAudit times a full audit of n objects; attributed, followed by naming the person behind
// each drifted field as the audit does with audit events (audit.Auditor.attribute), from a store
// holding 10 write events per object.
func benchAudit(b *testing.B, n int, attributed bool) {
	testcluster.Need(b)
	prefix := "b" + strconv.Itoa(n)
	objs := corpus(prefix, n)
	ensure(b, prefix, objs)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	cache := syncedCache(b)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	opts := drift.DefaultOptions()
	opts.ExtraKinds = []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ConfigMap"}}
	// The comparison as the audit runs it: typed by the cluster's schema (fetched outside the timer).
	models, _, err := cache.OpenAPIModels(context.Background(), []schema.GroupVersion{{Group: "apps", Version: "v1"}, {Version: "v1"}})
	if err != nil {
		b.Fatal(err)
	}
	if opts.Schema, err = drift.NewSchema(models); err != nil {
		b.Fatal(err)
	}
	var store *auditlog.Store
	var held float64
	if attributed {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		store = people(b, objs, cache)
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc)) / (1 << 20)
		b.Logf("%d audit events added in %s", store.Len(), time.Since(start).Round(time.Millisecond))
	}
	var found, named int
	var last []drift.Object
	var attributing time.Duration
	b.ResetTimer()
	for b.Loop() {
		rep := drift.Audit(objs, cache, opts)
		found, last = len(rep), rep
		if attributed {
			start := time.Now()
			named = audit.Attribute(rep, cache, store, opts.Applier)
			attributing += time.Since(start)
		}
	}
	b.StopTimer()
	if want := (n + 99) / 100; found != want {
		b.Fatalf("audit found %d drifted objects, want %d", found, want)
	}
	if attributed {
		if named != found {
			b.Fatalf("%d of %d drifted fields named", named, found)
		}
		for _, o := range last {
			if len(o.Fields) != 1 {
				b.Fatalf("%s/%s: %d drifted fields, want the replicas", o.Namespace, o.Name, len(o.Fields))
			}
			if a := o.Fields[0].Actor; a == nil || a.User != "alice" || a.Match != auditlog.MatchChanges {
				b.Fatalf("%s/%s %s: by %+v, want alice's kubectl scale", o.Namespace, o.Name, o.Fields[0].Path, a)
			}
		}
		b.ReportMetric(float64(attributing.Nanoseconds())/float64(b.N), "attribute-ns/op")
		b.ReportMetric(float64(store.Len()), "events")
		b.ReportMetric(held, "events-MiB")
	}
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(float64(after.HeapInuse-min(before.HeapInuse, after.HeapInuse))/(1<<20), "cache-heap-MiB")
	b.ReportMetric(rssMiB(os.Getpid()), "process-RSS-MiB")
}

func BenchmarkAudit1000(b *testing.B)  { benchAudit(b, 1000, false) }
func BenchmarkAudit10000(b *testing.B) { benchAudit(b, 10000, false) }

// BenchmarkAudit10000AttributedWith100000EventsHeld is BenchmarkAudit10000 followed by naming the
// person behind every drifted field (the 100 Deployments scaled by hand) from 100,000 audit
// events held (10 per object): its ns/op against BenchmarkAudit10000's is what matching adds to a
// full audit (the target: at most 5 %).
func BenchmarkAudit10000AttributedWith100000EventsHeld(b *testing.B) { benchAudit(b, 10000, true) }

// BenchmarkAudit1000AttributedWith10000EventsHeld is the same at 1,000 objects.
func BenchmarkAudit1000AttributedWith10000EventsHeld(b *testing.B) { benchAudit(b, 1000, true) }

// BenchmarkKubectlDiff1000 runs `kubectl diff --server-side` as the applier over the same 1,000
// objects and checks it names the same differing objects as the audit.
func BenchmarkKubectlDiff1000(b *testing.B) {
	testcluster.Need(b)
	objs := corpus("b1000", 1000)
	ensure(b, "b1000", objs)
	var stream []byte
	for _, o := range objs {
		o = o.DeepCopy()
		ann := map[string]string{testcluster.TrackingAnnotation: fmt.Sprintf("bench:%s/%s:%s/%s", o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName())}
		o.SetAnnotations(ann)
		doc, _ := yaml.Marshal(o.Object)
		stream = append(append(stream, "---\n"...), doc...)
	}
	file := filepath.Join(b.TempDir(), "objs.yaml")
	if err := os.WriteFile(file, stream, 0o644); err != nil {
		b.Fatal(err)
	}
	var names []string
	for b.Loop() {
		out, err := cluster.Kubectl(context.Background(), "diff", "--server-side", "--field-manager=argocd-controller", "--force-conflicts", "-f", file).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			b.Fatalf("kubectl diff: %v\n%s", err, out)
		}
		names = names[:0]
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "diff -u -N") {
				names = append(names, line)
			}
		}
	}
	b.StopTimer()
	sort.Strings(names)
	cache := syncedCache(b)
	opts := drift.DefaultOptions()
	opts.ExtraKinds = nil
	if got, want := len(names), len(drift.Audit(objs, cache, opts)); got != want {
		b.Fatalf("kubectl diff names %d objects, the audit %d", got, want)
	}
	b.ReportMetric(1000, "objects")
}

// BenchmarkWatchRSS10000 measures, in a fresh process, the resident memory of a live cache
// watching the 10,000 objects (what the daemon holds), after sync and a GC.
func BenchmarkWatchRSS10000(b *testing.B) {
	testcluster.Need(b)
	objs := corpus("b10000", 10000)
	ensure(b, "b10000", objs)
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRSSChild$")
		cmd.Env = append(os.Environ(), "PERF_RSS_KUBECONFIG="+cluster.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("child: %v\n%s", err, out)
		}
		var rss, hwm, n float64
		if _, err := fmt.Sscanf(lastLine(string(out), "RSS "), "RSS %f HWM %f OBJECTS %f", &rss, &hwm, &n); err != nil {
			b.Fatalf("child output: %v\n%s", err, out)
		}
		b.ReportMetric(rss, "RSS-MiB")
		b.ReportMetric(hwm, "peak-RSS-MiB")
		b.ReportMetric(n, "objects")
	}
}

func lastLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestRSSChild is the child of BenchmarkWatchRSS10000; it does nothing in a normal test run.
func TestRSSChild(t *testing.T) {
	kc := os.Getenv("PERF_RSS_KUBECONFIG")
	if kc == "" {
		t.Skip("only run as the child of BenchmarkWatchRSS10000")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cache, err := live.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ConfigMap"}}
	if err := cache.Watch(ctx, kinds, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 10 {
		for _, k := range kinds {
			n += len(cache.List(k, fmt.Sprintf("b10000-ns-%d", i)))
		}
	}
	runtime.GC()
	debug.FreeOSMemory()
	status := procStatus(os.Getpid())
	fmt.Printf("RSS %.1f HWM %.1f OBJECTS %d\n", status["VmRSS"]/1024, status["VmHWM"]/1024, n)
}
