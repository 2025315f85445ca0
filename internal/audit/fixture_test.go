package audit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/testcluster"
)

var (
	cluster    *testcluster.Cluster
	auditorBin string
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{ControllerManager: true}, &cluster))
}

// buildAuditor builds the CLI once for the tests that run it as a user would.
func buildAuditor(t *testing.T) string {
	t.Helper()
	if auditorBin != "" {
		return auditorBin
	}
	dir, err := os.MkdirTemp("", "auditor-bin-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "auditor")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/auditor").CombinedOutput()
	if err != nil {
		t.Fatalf("build auditor: %v\n%s", err, out)
	}
	auditorBin = bin
	return bin
}

// fixture is one test's copy of the platform: the project's manifests in a Git repository of its
// own, with every llm- name (namespaces, priority classes, the Application) prefixed, so that
// tests do not see each other's objects. It is synced to the test cluster as Argo CD would.
type fixture struct {
	t      *testing.T
	prefix string
	dir    string
	head   string
	syncer *testcluster.Syncer
}

var llmName = regexp.MustCompile(`\bllm-`)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, prefix: fmt.Sprintf("t%04x", rand.Uint32()&0xffff), dir: t.TempDir()}
	for _, top := range []string{"base", "components", "overlays", "apps"} {
		err := filepath.Walk(filepath.Join("../..", top), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel("../..", p)
			data = llmName.ReplaceAll(data, []byte(f.prefix+"-llm-"))
			return f.write(rel, string(data))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f.git("init", "-q", "-b", "main")
	f.commit("platform")
	var err error
	if f.syncer, err = testcluster.NewSyncer(cluster.Config); err != nil {
		t.Fatal(err)
	}
	f.sync(f.head)
	return f
}

func (f *fixture) write(rel, content string) error {
	p := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit records the work tree and returns the new head.
func (f *fixture) commit(msg string) string {
	f.git("add", "-A")
	f.git("commit", "-qm", msg)
	f.head = f.git("rev-parse", "HEAD")
	return f.head
}

// edit rewrites a file of the fixture's repository (old must occur).
func (f *fixture) edit(rel, old, new string) {
	f.t.Helper()
	p := filepath.Join(f.dir, rel)
	data, err := os.ReadFile(p)
	if err != nil {
		f.t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		f.t.Fatalf("%s does not contain %q", rel, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// ns names the fixture's namespace of a layer (inference, api, rag, ...).
func (f *fixture) ns(layer string) string { return f.prefix + "-llm-" + layer }

func (f *fixture) app() string { return f.prefix + "-llm-prod" }

// rendered renders prod at a revision.
func (f *fixture) rendered(rev string) *render.Result {
	f.t.Helper()
	repo, err := gitrepo.Open(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	snap, err := repo.Snapshot(rev)
	if err != nil {
		f.t.Fatal(err)
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := src.Render("prod")
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// sync applies prod at rev as Argo CD's server-side sync and records it in the Application.
func (f *fixture) sync(rev string) {
	f.t.Helper()
	ctx := context.Background()
	res := f.rendered(rev)
	if err := f.syncer.Sync(ctx, f.app(), res.Objects, false); err != nil {
		f.t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(f.dir, "apps", "prod", "llm-prod.yaml"))
	if err != nil {
		f.t.Fatal(err)
	}
	var app map[string]any
	if err := yaml.Unmarshal(data, &app); err != nil {
		f.t.Fatal(err)
	}
	if err := f.syncer.RecordSync(ctx, &unstructured.Unstructured{Object: app}, "file://"+f.dir, rev); err != nil {
		f.t.Fatal(err)
	}
}

// kubectl runs the real kubectl against the test cluster.
func (f *fixture) kubectl(args ...string) string {
	f.t.Helper()
	out, err := cluster.Kubectl(context.Background(), args...).CombinedOutput()
	if err != nil {
		f.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// kubectlEdit runs `kubectl edit` with a non-interactive editor applying a sed expression.
func (f *fixture) kubectlEdit(ns, obj, sedExpr string) {
	f.t.Helper()
	script := filepath.Join(f.t.TempDir(), "editor.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsed -i '"+sedExpr+"' \"$1\"\n"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	cmd := cluster.Kubectl(context.Background(), "-n", ns, "edit", obj)
	cmd.Env = append(cmd.Env, "EDITOR="+script)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "edited") {
		f.t.Fatalf("kubectl edit %s: %v\n%s", obj, err, out)
	}
}

// audit runs the auditor in-process, the way `auditor diff` does.
func (f *fixture) audit() *drift.Report {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo, err := gitrepo.Open(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	cache, err := live.New(ctx, cluster.Config)
	if err != nil {
		f.t.Fatal(err)
	}
	a := New(repo, cache)
	a.AppName = func(string) string { return f.app() }
	rep, err := a.Run(ctx, Request{Env: "prod"})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// object returns the drifted object of a kind and name, failing the test when absent.
func object(t *testing.T, rep *drift.Report, kind, name string) drift.Object {
	t.Helper()
	for _, o := range rep.Objects {
		if o.Kind == kind && o.Name == name {
			return o
		}
	}
	t.Fatalf("no drifted %s %s in report:\n%s", kind, name, dump(rep))
	return drift.Object{}
}

// field returns the drifted field at path.
func field(t *testing.T, rep *drift.Report, o drift.Object, path string) drift.Field {
	t.Helper()
	for _, f := range o.Fields {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("%s %s: no drifted field %s in report:\n%s", o.Kind, o.Name, path, dump(rep))
	return drift.Field{}
}

func dump(rep *drift.Report) string {
	data, _ := yaml.Marshal(rep)
	return string(data)
}
