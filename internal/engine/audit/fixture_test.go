package audit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

var (
	cluster    *testcluster.Cluster
	auditorBin string
)

func TestMain(m *testing.M) {
	render.ServeWorkerIfChild() // background renders run in a child process of this test binary
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
	out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/auditor").CombinedOutput()
	if err != nil {
		t.Fatalf("build auditor: %v\n%s", err, out)
	}
	auditorBin = bin
	return bin
}

// fixture is a test's copy of the platform, synced to the shared cluster.
type fixture struct {
	*testfixture.Platform
	t *testing.T
}

func newFixture(t *testing.T) *fixture {
	return &fixture{Platform: testfixture.New(t, cluster, "../../.."), t: t}
}

// audit runs the auditor in-process, the way `auditor diff` does.
func (f *fixture) audit() *drift.Report {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo, err := gitrepo.Open(f.Dir)
	if err != nil {
		f.t.Fatal(err)
	}
	cache, err := live.New(ctx, cluster.Config)
	if err != nil {
		f.t.Fatal(err)
	}
	a := New(Config{Repo: repo, Live: cache})
	a.AppName = func(string) string { return f.App() }
	rep, err := a.Run(ctx, Request{Env: f.Env})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// watchingAuditor returns an Auditor of f's repository and the test cluster whose live cache
// watches Applications (as the daemon's does), so that incremental audits see them change.
func (f *fixture) watchingAuditor(ctx context.Context) *Auditor {
	f.t.Helper()
	repo, err := gitrepo.Open(f.Dir)
	if err != nil {
		f.t.Fatal(err)
	}
	cache, err := live.New(ctx, cluster.Config)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cache.Watch(ctx, nil, []schema.GroupVersionKind{argocd.ApplicationGVK}); err != nil {
		f.t.Fatal(err)
	}
	return New(Config{Repo: repo, Live: cache})
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
