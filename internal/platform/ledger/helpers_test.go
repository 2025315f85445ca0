package ledger

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// t0 is the time of the first commit of a fixture; commit i is i hours later.
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// fixture is a bare repository holding a copy of the project's manifests, and a CLI work tree.
type fixture struct {
	t    *testing.T
	bare string
	work string
	n    int // commits made by the work tree
}

func gitRun(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@example.com",
		"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@example.com", "GIT_TERMINAL_PROMPT=0")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	out, err := gitRun(f.work, nil, args...)
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// newFixture copies base/, components/ and overlays/ of the project into a repository, applies
// edit to the work tree before the first commit, and pushes it to a bare repository.
func newFixture(t *testing.T, edit func(f *fixture)) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, bare: filepath.Join(dir, "platform.git"), work: filepath.Join(dir, "work")}
	if out, err := gitRun(dir, nil, "init", "-q", "--bare", "-b", "main", f.bare); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	if out, err := gitRun(dir, nil, "clone", "-q", f.bare, f.work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	gittest.WriteFiles(t, f.work, gittest.ReadTree(t, root, "base", "components", "overlays"))
	if edit != nil {
		edit(f)
	}
	f.commit("platform")
	return f
}

func mkdirs(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.work, rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) write(rel, content string) {
	f.t.Helper()
	if err := os.WriteFile(mkdirs(f.t, filepath.Join(f.work, rel)), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// replace replaces old (which must occur) by new in a work tree file.
func (f *fixture) replace(rel, old, new string) {
	f.t.Helper()
	c := f.read(rel)
	if !strings.Contains(c, old) {
		f.t.Fatalf("%s does not contain %q", rel, old)
	}
	f.write(rel, strings.ReplaceAll(c, old, new))
}

// when is the time of the next commit.
func (f *fixture) when() time.Time { return t0.Add(time.Duration(f.n) * time.Hour) }

func (f *fixture) dateEnv() []string {
	d := f.when().Format(time.RFC3339)
	return []string{"GIT_AUTHOR_DATE=" + d, "GIT_COMMITTER_DATE=" + d}
}

// commit pulls, commits everything with the next commit time and pushes; returns the sha.
func (f *fixture) commit(msg string) string {
	f.t.Helper()
	f.pull()
	f.git("add", "-A")
	if out, err := gitRun(f.work, f.dateEnv(), "commit", "-q", "-m", msg); err != nil {
		f.t.Fatalf("commit: %v\n%s", err, out)
	}
	return f.push()
}

// revert reverts sha with the git CLI (its default message) and pushes.
func (f *fixture) revert(sha string) string {
	f.t.Helper()
	f.pull()
	if out, err := gitRun(f.work, f.dateEnv(), "revert", "--no-edit", sha); err != nil {
		f.t.Fatalf("git revert: %v\n%s", err, out)
	}
	return f.push()
}

func (f *fixture) push() string {
	f.t.Helper()
	f.git("push", "-q", "origin", "HEAD:refs/heads/main")
	f.n++
	return f.git("rev-parse", "HEAD")
}

func (f *fixture) pull() {
	f.t.Helper()
	if f.n > 0 {
		f.git("pull", "-q", "--ff-only", "origin", "main")
	}
}

func (f *fixture) url() string { return "file://" + f.bare }

func (f *fixture) remote() *gitrepo.Remote {
	f.t.Helper()
	r, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: f.url()})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) open() *gitrepo.Repo {
	f.t.Helper()
	r, err := gitrepo.Open(f.url())
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) fsck() {
	f.t.Helper()
	out, err := gitRun(f.bare, nil, "fsck", "--strict", "--no-dangling")
	if err != nil || out != "" {
		f.t.Fatalf("git fsck: %v\n%s", err, out)
	}
}

// ledgerFile is the ledger of env at the bare repository's main ("" when absent).
func (f *fixture) ledgerFile(env string) string {
	f.t.Helper()
	out, err := gitRun(f.bare, nil, "show", "main:"+Path(env))
	if err != nil {
		return ""
	}
	return out
}

func (f *fixture) sync(env string) SyncResult {
	f.t.Helper()
	res, err := Sync(context.Background(), f.remote(), SyncRequest{Env: env})
	if err != nil {
		f.t.Fatalf("sync %s: %v", env, err)
	}
	return res
}

// summary renders records as "kind[/effect] deployment share [changes]" lines.
func summary(recs []Record) []string {
	var out []string
	for _, r := range recs {
		k := string(r.Kind)
		if r.Effect != "" {
			k += "/" + string(r.Effect)
		}
		s := fmt.Sprintf("%s %s %g", k, r.Deployment, r.SharePercent)
		if len(r.Changes) > 0 {
			s += " " + strings.Join(r.Changes, ",")
		}
		out = append(out, s)
	}
	return out
}

// Edits of the prod overlay.
const (
	canaryResource = "  - canary\n"
	canaryPatch    = "  - path: canary/route-split.yaml\n"
	prodKust       = "overlays/prod/kustomization.yaml"
	routeSplit     = "overlays/prod/canary/route-split.yaml"
	qwenBase       = "base/vllm/qwen.yaml"
)

// withoutCanary removes the canary from the prod overlay.
func withoutCanary(f *fixture) {
	f.replace(prodKust, canaryResource, "")
	f.replace(prodKust, canaryPatch, "")
}

// setSplit sets the stable/canary weights of the qwen route.
func (f *fixture) setSplit(stable, canary int) {
	f.t.Helper()
	c := f.read(routeSplit)
	lines := strings.Split(c, "\n")
	seen := 0
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "weight:") {
			w := stable
			if seen == 1 {
				w = canary
			}
			lines[i] = l[:strings.Index(l, "weight:")] + fmt.Sprintf("weight: %d", w)
			seen++
		}
	}
	f.write(routeSplit, strings.Join(lines, "\n"))
}
