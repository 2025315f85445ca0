package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// BenchmarkAuditOfOneMovedApplicationOfAGroupOf20 times, in one run over the same env, the
// incremental audit after one Application of a group synced a new revision (it is audited again
// alone) against a full audit of the group in the same state. The env is
// BenchmarkGroupOf20ApplicationsOf500Objects' (a root over 20 Applications of 500 objects each,
// 10,000 objects), synced by testcluster.Syncer (server-side apply as argocd-controller, and
// each Application's status recorded as Argo CD's controller records a sync): no Argo CD runs.
//
// Each iteration commits a new value of one ConfigMap of app-07 on a branch of its own (main, the
// branch every Application tracks, stays: `argocd app sync --revision` of one Application), syncs
// that ConfigMap and records app-07 synced at the commit, waits until the auditor's watch has
// both, then times:
//   - alone-ms: Auditor.Update with the Application's watch event, as the daemon calls it: app-07
//     rendered at the new commit and compared (500 objects), the other 20 Applications' verdicts
//     kept, the group's report merged. It must audit app-07 alone and report it at the commit,
//     in sync.
//   - full-ms: Auditor.Run of the group in that state, right after: the 21 renders all come from
//     the render cache (app-07's at the new commit was just made by the alone audit), then
//     10,000 objects compared and Argo CD's verdicts. This is what the daemon paid for the same
//     event before, less the one render: the ratio understates the gain.
//
// Both are means over the iterations (one at the default -benchtime: an iteration takes over a
// second); ns/op also counts the commit, the sync and the waits. Each alone audit follows a full
// audit: one on top of another alone audit is not timed.
//
//	go test ./internal/engine/audit/perf -run '^$' -bench BenchmarkAuditOfOneMovedApplication -timeout 30m
func BenchmarkAuditOfOneMovedApplicationOfAGroupOf20(b *testing.B) {
	testcluster.Need(b)
	ctx := context.Background()
	dir, apps := writeGroupRepo(b)
	// Without their cascade finalizer: no Argo CD controller runs here to remove it, and the
	// Syncer records Applications without one.
	for _, app := range apps {
		file := filepath.Join(dir, "apps", groupEnv, app+".yaml")
		u := readManifest(b, file)
		u.SetFinalizers(nil)
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gitIn(b, dir, "commit", "-qam", "no finalizers: no Argo CD controller runs here")
	head := strings.TrimSpace(string(gitOut(b, dir, "rev-parse", "HEAD")))
	syncer, err := testcluster.NewSyncer(cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	src, err := render.FromDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, app := range apps {
		res, err := render.Engine{}.Render(ctx, src, render.Target{Name: render.AppTarget("workloads/" + app)})
		if err != nil {
			b.Fatal(err)
		}
		var nss, rest []*unstructured.Unstructured
		for _, o := range res.Objects {
			if o.GetKind() == "Namespace" {
				nss = append(nss, o)
			} else {
				rest = append(rest, o)
			}
		}
		if err := syncer.Sync(ctx, app, nss, false); err != nil { // first: the others are in it
			b.Fatal(err)
		}
		applyAll(b, rest, func(o *unstructured.Unstructured) error {
			return syncer.Sync(ctx, app, []*unstructured.Unstructured{o}, false)
		})
	}
	manifest := func(rel string) *unstructured.Unstructured { return readManifest(b, filepath.Join(dir, rel)) }
	root := manifest(filepath.Join("clusters", groupEnv, "root.yaml"))
	if err := syncer.RecordSync(ctx, root, "", head); err != nil {
		b.Fatal(err)
	}
	for _, app := range apps {
		if err := syncer.RecordSync(ctx, manifest(filepath.Join("apps", groupEnv, app+".yaml")), "", head); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("synced the root and %d Applications of %d objects in %s", len(apps), groupObjects, time.Since(start).Round(time.Second))

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	repo, err := gitrepo.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	cache, err := live.New(wctx, cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	if err := cache.Watch(wctx, nil, []schema.GroupVersionKind{argocd.ApplicationGVK}); err != nil {
		b.Fatal(err)
	}
	a := audit.New(audit.Config{Repo: repo, Live: cache})
	rep, err := a.Run(ctx, audit.Request{Env: groupEnv})
	if err != nil {
		b.Fatal(err)
	}
	if !rep.InSync || len(rep.Applications) != len(apps)+1 {
		b.Fatalf("the group right after its sync: %d Applications, in sync %v: %s", len(rep.Applications), rep.InSync, drifted(rep))
	}

	moved, cmName := apps[7], "cm-00001"
	appRef := drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: testcluster.ArgoCDNamespace, Name: moved}
	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gitIn(b, dir, "checkout", "-q", "-b", "hotfix")
	var alone, full time.Duration
	n := 0
	for b.Loop() {
		n++
		value := fmt.Sprint(8192 + n)
		file := filepath.Join(dir, "workloads", moved, "configmaps-00.yaml")
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		edited := editMaxTokens(b, string(data), cmName, value)
		if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
			b.Fatal(err)
		}
		gitIn(b, dir, "commit", "-qam", "hotfix "+value)
		rev := strings.TrimSpace(string(gitOut(b, dir, "rev-parse", "HEAD")))
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": cmName, "namespace": moved, "labels": map[string]any{"app.kubernetes.io/part-of": "llm-platform"}},
			"data":     map[string]any{"model": cmName, "maxTokens": value, "gpu": "l40s"}}}
		if err := syncer.Sync(ctx, moved, []*unstructured.Unstructured{cm}, false); err != nil {
			b.Fatal(err)
		}
		if err := syncer.RecordSync(ctx, manifest(filepath.Join("apps", groupEnv, moved+".yaml")), "", rev); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			u, ok := cache.Get(argocd.ApplicationGVK, testcluster.ArgoCDNamespace, moved)
			c, cok := cache.Get(cmGVK, moved, cmName)
			if ok && cok {
				synced, _, _ := unstructured.NestedString(u.Object, "status", "sync", "revision")
				got, _, _ := unstructured.NestedString(c.Object, "data", "maxTokens")
				if synced == rev && got == value {
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("the watch did not see %s synced at %.8s", moved, rev)
			}
		}

		before := a.AloneAudits()
		t0 := time.Now()
		rep, err := a.Update(ctx, groupEnv, []drift.Ref{appRef, {Kind: "ConfigMap", Namespace: moved, Name: cmName}})
		alone += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if a.AloneAudits() != before+1 {
			b.Fatalf("the Update did not audit %s alone", moved)
		}
		checkMoved(b, rep, moved, rev)

		t0 = time.Now()
		rep, err = a.Run(ctx, audit.Request{Env: groupEnv})
		full += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		checkMoved(b, rep, moved, rev)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(ms(alone), "alone-ms")
	b.ReportMetric(ms(full), "full-ms")
}

// editMaxTokens sets data.maxTokens of ConfigMap name in a file of BenchmarkGroupOf20's ConfigMaps.
func editMaxTokens(b *testing.B, docs, name, value string) string {
	b.Helper()
	parts := strings.Split(docs, "---\n")
	for i, p := range parts {
		if strings.Contains(p, "  name: "+name+"\n") {
			lines := strings.Split(p, "\n")
			for j, l := range lines {
				if strings.HasPrefix(l, "  maxTokens: ") {
					lines[j] = "  maxTokens: \"" + value + "\""
				}
			}
			parts[i] = strings.Join(lines, "\n")
			return strings.Join(parts, "---\n")
		}
	}
	b.Fatalf("no ConfigMap %s", name)
	return ""
}

// checkMoved fails unless rep is the group in sync, with Application moved at rev.
func checkMoved(b *testing.B, rep *drift.Report, moved, rev string) {
	b.Helper()
	if !rep.InSync {
		b.Fatalf("the group is not in sync: %s", drifted(rep))
	}
	for _, app := range rep.Applications {
		if app.Name == moved {
			if app.Revision != rev {
				b.Fatalf("%s reported at %.8s, want %.8s", moved, app.Revision, rev)
			}
			return
		}
	}
	b.Fatalf("%s not in the report", moved)
}

// drifted lists the first drifted objects of rep, with their first field.
func drifted(rep *drift.Report) string {
	var out []string
	for i, o := range rep.Objects {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(rep.Objects)-i))
			break
		}
		s := fmt.Sprintf("%s %s %s/%s of %s %s", o.Status, o.Kind, o.Namespace, o.Name, o.Application, o.Note)
		if len(o.Fields) > 0 {
			s += fmt.Sprintf(" (%s: %v → %v)", o.Fields[0].Path, o.Fields[0].Desired, o.Fields[0].Live)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// readManifest reads one object from a YAML file.
func readManifest(b *testing.B, file string) *unstructured.Unstructured {
	b.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		b.Fatal(err)
	}
	return u
}
