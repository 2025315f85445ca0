package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// auditorBinary builds the CLI once: the end-to-end figures are for the process a user runs.
func auditorBinary(b *testing.B) string {
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "auditor-bench-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "auditor")
		out, err := exec.Command("go", "build", "-o", binPath, "../../../../cmd/auditor").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build auditor: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		b.Fatal(binErr)
	}
	return binPath
}

// benchRepo writes a Git repository whose overlays/<env> renders objs, ten files of a base each
// holding one namespace's objects, as the applier left them (with Argo CD's tracking
// annotation), and records the Application llm-<env> as synced to its head.
func benchRepo(b *testing.B, env string, objs []*unstructured.Unstructured, more ...benchEnv) string {
	b.Helper()
	return benchRepoOf(b, append([]benchEnv{{env: env, base: "bench", objs: objs}}, more...)...)
}

// benchRepoOf is benchRepo of the envs given.
func benchRepoOf(b *testing.B, envs ...benchEnv) string {
	b.Helper()
	dir := b.TempDir()
	for _, e := range envs {
		writeEnv(b, dir, e)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-qm", "bench"}} {
		gitIn(b, dir, args...)
	}
	for _, e := range envs {
		recordSync(b, e.env, dir)
	}
	return dir
}

// benchEnv is one more env of a benchmark's repository: overlays/<env> over base/<base>.
type benchEnv struct {
	env, base string
	objs      []*unstructured.Unstructured
	// bare writes the objects as they are, without Argo CD's tracking annotation.
	bare bool
}

// writeEnv writes e's objects into dir/base/<base>, one file per namespace, and its overlay.
func writeEnv(b *testing.B, dir string, e benchEnv) {
	b.Helper()
	files := map[string][]byte{}
	var names []string
	for _, o := range e.objs {
		o = o.DeepCopy()
		if !e.bare {
			o.SetAnnotations(map[string]string{testcluster.TrackingAnnotation: fmt.Sprintf("bench:%s/%s:%s/%s", o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName())})
		}
		doc, err := yaml.Marshal(o.Object)
		if err != nil {
			b.Fatal(err)
		}
		f := o.GetNamespace() + ".yaml"
		if _, ok := files[f]; !ok {
			names = append(names, f)
		}
		files[f] = append(append(files[f], "---\n"...), doc...)
	}
	sort.Strings(names)
	write := func(rel string, data []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range names {
		write(filepath.Join("base", e.base, n), files[n])
	}
	write(filepath.Join("base", e.base, "kustomization.yaml"), []byte("resources:\n  - "+strings.Join(names, "\n  - ")+"\n"))
	write(filepath.Join("overlays", e.env, "kustomization.yaml"), []byte("resources:\n  - ../../base/"+e.base+"\n"))
}

// recordSync records the Application llm-<env> as synced to dir's HEAD, as Argo CD's controller
// does after an automated sync of a new commit, and returns that commit.
func recordSync(b *testing.B, env, dir string) string {
	b.Helper()
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		b.Fatal(err)
	}
	syncer, err := testcluster.NewSyncer(cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "llm-" + env, "namespace": "argocd"},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"path": "overlays/" + env, "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc"},
		},
	}}
	if err := syncer.RecordSync(context.Background(), app, "file://"+dir, strings.TrimSpace(string(head))); err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(string(head))
}

// run runs the auditor or, with name "kubectl", the cluster's kubectl; exit 1 (differences
// found) is success. It returns stdout.
func run(b *testing.B, name string, args ...string) []byte {
	b.Helper()
	var cmd *exec.Cmd
	if name == "kubectl" {
		cmd = cluster.Kubectl(context.Background(), args...)
	} else {
		cmd = exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		b.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	lastStderr = stderr.String()
	return out
}

// lastStderr is the standard error of the last command run.
var lastStderr string

// stage reads one stage's duration from `auditor diff --timings` output ("timings: git=0.01s ...").
func stage(b *testing.B, stderr, name string) time.Duration {
	for _, line := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(line, "timings: ")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if v, ok := strings.CutPrefix(f, name+"="); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					b.Fatalf("timings %q: %v", line, err)
				}
				return d
			}
		}
	}
	b.Fatalf("no %s timing in:\n%s", name, stderr)
	return 0
}

// benchEndToEnd times, one process each, over the same n objects — manifests without annotations,
// applied with no tracking annotation, each Deployment annotated by the real Deployment
// controller after its rollout — and the same hand edits (every 100th Deployment's image set by
// kubectl set image): `auditor render` (the kustomize render both tools pay),
// `auditor diff` with no caches (Git read + render + list + compare + Argo CD's verdict; it also
// reports its own render stage and what the audit adds to it, measured in the same process),
// `auditor diff` a second time on the same revision and live objects (caches warm: the render,
// Argo CD's in-sync verdicts), and
// `kubectl diff --server-side -k` of the same overlay. It fails unless both diffs name the same
// objects, and exactly the edited ones.
func benchEndToEnd(b *testing.B, n int) {
	testcluster.Need(b)
	prefix := "u" + strconv.Itoa(n)
	objs := corpus(prefix, n)
	ensureBare(b, prefix, objs)
	env := "e" + strconv.Itoa(n)
	dir := benchRepoOf(b, benchEnv{env: env, base: "bench", objs: objs, bare: true})
	bin := auditorBinary(b)
	overlay := filepath.Join(dir, "overlays", env)
	diff := []string{"diff", "--env", env, "--repo", dir, "-o", "json"}
	if d := os.Getenv("BENCH_PROFILE_DIR"); d != "" { // CPU profiles of the auditor runs, to read with go tool pprof
		diff = append(diff, "--profile=cpu", "--profile-output="+filepath.Join(d, env+".pprof"))
	}
	var ours, cached, theirs []string

	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			run(b, bin, "render", "--env", env, "--repo", dir, "--revision", "HEAD")
		}
		b.ReportMetric(float64(n), "objects")
	})
	b.Run("auditor-diff", func(b *testing.B) {
		var rendered, total time.Duration
		for b.Loop() {
			start := time.Now()
			out := run(b, bin, append(diff, "--cache-dir=off", "--timings")...)
			total += time.Since(start)
			rendered += stage(b, lastStderr, "render")
			b.Log(strings.TrimSpace(lastStderr))
			ours = reported(b, out)
		}
		// The render inside the same process, and what the rest of the audit adds to it: Git
		// read, list and watch, schema, compare, Argo CD's verdict, process start and output.
		b.ReportMetric(rendered.Seconds()/float64(b.N), "render-s/op")
		b.ReportMetric(100*(total-rendered).Seconds()/rendered.Seconds(), "audit-over-render-%")
		b.ReportMetric(float64(n), "objects")
	})
	b.Run("auditor-diff-cached", func(b *testing.B) {
		cache := b.TempDir()
		run(b, bin, append(diff, "--cache-dir="+cache)...) // the first diff of this revision fills it
		b.ResetTimer()
		for b.Loop() {
			cached = reported(b, run(b, bin, append(diff, "--cache-dir="+cache)...))
		}
		b.ReportMetric(float64(n), "objects")
	})
	b.Run("kubectl-diff-k", func(b *testing.B) {
		for b.Loop() {
			theirs = diffed(run(b, "kubectl", "diff", "--server-side", "--field-manager=argocd-controller", "--force-conflicts", "-k", overlay))
		}
		b.ReportMetric(float64(n), "objects")
	})
	for _, got := range [][]string{ours, cached} {
		if strings.Join(got, " ") != strings.Join(theirs, " ") {
			b.Fatalf("auditor diff names %d objects, kubectl diff %d:\nauditor: %v\nkubectl: %v", len(got), len(theirs), got, theirs)
		}
	}
	var edited []string
	for i := 0; i < len(objs); i += 100 {
		edited = append(edited, "Deployment."+objs[i].GetNamespace()+"."+objs[i].GetName())
	}
	sort.Strings(edited)
	if strings.Join(ours, " ") != strings.Join(edited, " ") {
		b.Fatalf("auditor diff names %v, the edited Deployments are %v", ours, edited)
	}
}

// reported lists the objects of an `auditor diff -o json` report as Kind.namespace.name.
func reported(b *testing.B, out []byte) []string {
	var rep drift.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		b.Fatalf("auditor diff output: %v\n%.2000s", err, out)
	}
	var ids []string
	for _, o := range rep.Objects {
		ids = append(ids, o.Kind+"."+o.Namespace+"."+o.Name)
	}
	sort.Strings(ids)
	return ids
}

// diffed lists the objects of kubectl diff's output as Kind.namespace.name (its file names are
// group.version.Kind.namespace.name).
func diffed(out []byte) []string {
	var ids []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "diff -u -N ") {
			continue
		}
		f := strings.Fields(line)
		parts := strings.Split(filepath.Base(f[len(f)-2]), ".")
		if len(parts) >= 3 {
			ids = append(ids, strings.Join(parts[len(parts)-3:], "."))
		}
	}
	sort.Strings(ids)
	return ids
}

func BenchmarkDiffEndToEnd1000(b *testing.B) { benchEndToEnd(b, 1000) }
func BenchmarkDiffEndToEnd3000(b *testing.B) { benchEndToEnd(b, 3000) }
