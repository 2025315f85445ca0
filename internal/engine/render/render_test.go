package render

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// writeTree writes files (path -> content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

var miniRepo = map[string]string{
	"base/app/kustomization.yaml":      "resources: [cm.yaml]\n",
	"base/app/cm.yaml":                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: llm-api\ndata:\n  replicas: \"1\"\n",
	"overlays/dev/kustomization.yaml":  "resources: [../../base/app]\n",
	"overlays/prod/kustomization.yaml": "resources: [../../base/app]\npatches:\n- path: more.yaml\n",
	"overlays/prod/more.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: llm-api\ndata:\n  replicas: \"3\"\n",
}

// newRepo writes files into a new Git repository and commits them on main.
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "first")
	return dir
}

func TestRenderFromGitRevisionWithoutCheckout(t *testing.T) {
	dir := newRepo(t, miniRepo)
	first := git(t, dir, "rev-parse", "HEAD")
	writeTree(t, dir, map[string]string{"overlays/prod/more.yaml": strings.Replace(miniRepo["overlays/prod/more.yaml"], `"3"`, `"5"`, 1)})
	git(t, dir, "commit", "-qam", "second")
	// The work tree now says 7: a revision must be read from Git, not from disk.
	writeTree(t, dir, map[string]string{"overlays/prod/more.yaml": strings.Replace(miniRepo["overlays/prod/more.yaml"], `"3"`, `"7"`, 1)})

	repo, err := gitrepo.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ rev, want string }{{first, `replicas: "3"`}, {"HEAD", `replicas: "5"`}, {"main~1", `replicas: "3"`}}
	for _, tc := range cases {
		snap, err := repo.Snapshot(tc.rev)
		if err != nil {
			t.Fatal(err)
		}
		src, err := FromSnapshot(snap)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Engine{}.Render(context.Background(), src, Target{Name: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.YAML), tc.want) {
			t.Errorf("revision %s: rendered\n%s\nwant %s", tc.rev, res.YAML, tc.want)
		}
		if res.Revision != snap.Revision || len(res.Revision) != 40 {
			t.Errorf("revision %s: result revision %q", tc.rev, res.Revision)
		}
	}
	disk, _ := FromDir(dir)
	res, err := Engine{}.Render(context.Background(), disk, Target{Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.YAML), `replicas: "7"`) {
		t.Errorf("work tree render did not read the work tree:\n%s", res.YAML)
	}
	if _, err := repo.Snapshot("no-such-branch"); err == nil || !strings.Contains(err.Error(), "no-such-branch") {
		t.Errorf("unknown revision: error %v should name it", err)
	}
}

func TestMalformedYAMLNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for k, v := range miniRepo {
		files[k] = v
	}
	files["overlays/prod/more.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n   namespace: llm-api\n"
	writeTree(t, dir, files)
	src, _ := FromDir(dir)
	_, err := Engine{}.Render(context.Background(), src, Target{Name: "prod"})
	if err == nil {
		t.Fatal("malformed overlay rendered without error")
	}
	if !strings.Contains(err.Error(), "overlays/prod/more.yaml:5:") {
		t.Errorf("error does not name file and line: %v", err)
	}
	// The other environment does not include the broken file and still renders.
	if _, err := (Engine{}).Render(context.Background(), src, Target{Name: "dev"}); err != nil {
		t.Errorf("dev should still render: %v", err)
	}
}

func TestUnknownEnvListsTheKnownOnes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, miniRepo)
	src, _ := FromDir(dir)
	_, err := Engine{}.Render(context.Background(), src, Target{Name: "qa"})
	if err == nil || !strings.Contains(err.Error(), "dev, prod") {
		t.Errorf("error %v should list dev, prod", err)
	}
}

func BenchmarkRenderAllOverlays(b *testing.B) {
	src, err := FromDir("../../..")
	if err != nil {
		b.Fatal(err)
	}
	for _, env := range envs { // warm
		if _, err := (Engine{}).Render(context.Background(), src, Target{Name: env}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, env := range envs {
			if _, err := (Engine{}).Render(context.Background(), src, Target{Name: env}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkRenderAllOverlaysConcurrently(b *testing.B) {
	src, err := FromDir("../../..")
	if err != nil {
		b.Fatal(err)
	}
	all := func() error { // one goroutine per env: kustomize is CPU-bound
		var g errgroup.Group
		for _, env := range envs {
			g.Go(func() error {
				_, err := Engine{}.Render(context.Background(), src, Target{Name: env})
				return err
			})
		}
		return g.Wait()
	}
	if err := all(); err != nil { // warm
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := all(); err != nil {
			b.Fatal(err)
		}
	}
}
