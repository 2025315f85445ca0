package perf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// repoServerObjects is the size of BenchmarkDiffThroughRepoServer3000's Application.
const repoServerObjects = 3000

// BenchmarkDiffThroughRepoServer3000 times, on one Application of 3,000 objects (its Namespace
// and ConfigMaps) that real Argo CD synced, with 30 ConfigMaps edited by hand:
// `auditor diff --repo-server` (the render Argo CD's repo-server made, from its cache) against
// `kubectl diff --server-side -k` of the same overlay. It fails unless both name exactly the
// edited ConfigMaps, and unless the repo-server answered each of the auditor's requests from the
// render Argo CD's controller cached (its log: hits, no miss).
//
//	go test -run '^$' -bench '^BenchmarkDiffThroughRepoServer3000$' -benchtime 3x -timeout 60m ./internal/engine/audit/perf
func BenchmarkDiffThroughRepoServer3000(b *testing.B) {
	testcluster.Need(b)
	bin := auditorBinary(b)
	c := startArgoCluster(b)
	ctx := context.Background()
	dyn, err := c.Dynamic()
	if err != nil {
		b.Fatal(err)
	}
	const env, ns = "rs", "rs-objects"
	dir := writeRepoServerRepo(b, env, ns)
	head := strings.TrimSpace(string(gitOut(b, dir, "rev-parse", "HEAD")))
	app := filepath.Join(dir, "clusters", env, "app.yaml")
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", app).CombinedOutput(); err != nil {
		b.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if err := waitApps(ctx, dyn, []string{"llm-" + env}, 20*time.Minute, func(u *unstructured.Unstructured) string { return syncedAt(u, head) }); err != nil {
		b.Fatalf("Argo CD did not sync: %v\n%s", err, tailLog(filepath.Join(c.Dir, "argocd-application-controller.log"), 30))
	}
	var edited []string
	for i := 1; i < repoServerObjects; i += repoServerObjects / 30 {
		name := fmt.Sprintf("cm-%05d", i)
		if out, err := c.Kubectl(ctx, "-n", ns, "patch", "configmap", name, "--type=merge", `-p={"data":{"gpu":"h100"}}`).CombinedOutput(); err != nil {
			b.Fatalf("kubectl patch: %v\n%s", err, out)
		}
		edited = append(edited, "ConfigMap."+ns+"."+name)
	}
	sort.Strings(edited)
	env2 := append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	exe := func(name string, args ...string) []byte {
		b.Helper()
		cmd := exec.Command(name, args...)
		if name == "kubectl" {
			cmd = c.Kubectl(ctx, args...)
		}
		cmd.Env = env2
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			b.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
		}
		return out
	}
	var ours, theirs []string
	rsLog := filepath.Join(c.Dir, "argocd-repo-server.log")
	before := fileSize(rsLog)
	b.Run("auditor-diff-repo-server", func(b *testing.B) {
		for b.Loop() {
			ours = reported(b, exe(bin, "diff", "--env", env, "--repo", dir, "-o", "json", "--cache-dir=off",
				"--repo-server", c.RepoServer, "--repo-server-plaintext"))
		}
		b.ReportMetric(repoServerObjects, "objects")
	})
	// Each of the auditor's requests was answered from the render Argo CD's controller made: the
	// repo-server logs a hit for llm-rs and no miss (a miss is a fresh kustomize render).
	hits, misses := cacheAnswers(b, rsLog, before, "llm-"+env)
	if hits == 0 || misses > 0 {
		b.Fatalf("the repo-server answered the auditor with %d cache hits and %d misses for llm-%s: the auditor's request is not the controller's", hits, misses, env)
	}
	b.Run("kubectl-diff-k", func(b *testing.B) {
		for b.Loop() {
			theirs = diffed(exe("kubectl", "diff", "--server-side", "--field-manager=argocd-controller", "--force-conflicts", "-k", filepath.Join(dir, "overlays", env)))
		}
		b.ReportMetric(repoServerObjects, "objects")
	})
	if strings.Join(ours, " ") != strings.Join(edited, " ") || strings.Join(theirs, " ") != strings.Join(edited, " ") {
		b.Fatalf("the edited ConfigMaps are %d: %.300v;\nauditor diff names %d: %.300v;\nkubectl diff names %d: %.300v", len(edited), edited, len(ours), ours, len(theirs), theirs)
	}
}

// writeRepoServerRepo writes a repository whose overlays/<env> renders ns and its ConfigMaps
// (repoServerObjects objects, in files of 100), and the Application llm-<env> that syncs it
// (clusters/<env>/app.yaml, server-side apply, automated).
func writeRepoServerRepo(b *testing.B, env, ns string) string {
	b.Helper()
	dir := b.TempDir()
	write := func(rel string, data []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	files := []string{"namespace.yaml"}
	// Each object carries the tracking annotation Argo CD writes on it, as Git's objects do in
	// BenchmarkDiffEndToEnd: kubectl diff (as Argo CD's field manager) would remove it otherwise.
	// Argo CD writes a cluster-scoped object's with the destination namespace in it.
	write(filepath.Join("overlays", env, "namespace.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+
		"\n  annotations: {"+testcluster.TrackingAnnotation+": \"llm-"+env+":/Namespace:"+ns+"/"+ns+"\"}\n"))
	var doc strings.Builder
	for j := 1; j < repoServerObjects; j++ {
		name := fmt.Sprintf("cm-%05d", j)
		fmt.Fprintf(&doc, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  annotations: {%s: \"llm-%s:/ConfigMap:%s/%s\"}\ndata:\n  model: %s\n  gpu: l40s\n",
			name, ns, testcluster.TrackingAnnotation, env, ns, name, name)
		if j%100 == 0 || j == repoServerObjects-1 {
			f := fmt.Sprintf("configmaps-%02d.yaml", (j-1)/100)
			write(filepath.Join("overlays", env, f), []byte(doc.String()))
			files = append(files, f)
			doc.Reset()
		}
	}
	write(filepath.Join("overlays", env, "kustomization.yaml"), []byte("resources:\n  - "+strings.Join(files, "\n  - ")+"\n"))
	appYAML, err := yaml.Marshal(map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "llm-" + env, "namespace": testcluster.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "file://" + dir, "targetRevision": "main", "path": "overlays/" + env},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
			"syncPolicy": map[string]any{"automated": map[string]any{"prune": true, "selfHeal": false},
				"syncOptions": []any{"ServerSideApply=true"}},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	write(filepath.Join("clusters", env, "app.yaml"), appYAML)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-qm", "one Application of 3,000 objects"}} {
		gitIn(b, dir, args...)
	}
	return dir
}

// cacheAnswers counts the repo-server's "manifest cache hit" and "manifest cache miss" lines for
// Application app in its log after offset.
func cacheAnswers(b *testing.B, path string, offset int64, app string) (hits, misses int) {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		if !strings.Contains(line, "application="+app+" ") {
			continue
		}
		switch {
		case strings.Contains(line, `msg="manifest cache hit"`):
			hits++
		case strings.Contains(line, `msg="manifest cache miss"`):
			misses++
		}
	}
	return hits, misses
}
