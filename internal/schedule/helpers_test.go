package schedule

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-gitops/platform/internal/gitrepo"
)

// projectRoot is the repository root of this project (the tests run in internal/schedule).
const projectRoot = "../.."

func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Human", "GIT_AUTHOR_EMAIL=human@example.com",
		"GIT_COMMITTER_NAME=Human", "GIT_COMMITTER_EMAIL=human@example.com",
		"GIT_TERMINAL_PROMPT=0")
}

func gitTry(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv(dir)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func gitOut(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitTry(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

// projectFiles reads base/, components/, overlays/ and clusters/ of the project.
func projectFiles(t testing.TB) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, dir := range []string{"base", "components", "overlays", "clusters"} {
		root := filepath.Join(projectRoot, dir)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(projectRoot, p)
			files[filepath.ToSlash(rel)] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// commentedScaling is overlays/prod/scaling.yaml with comments next to the qwen field.
func commentedScaling(t testing.TB, files map[string]string) {
	t.Helper()
	const old = "spec:\n  minReplicaCount: 2\n  maxReplicaCount: 8\n"
	const repl = "spec:\n  # floor outside peaks; clusters/prod/schedule.yaml raises it\n  minReplicaCount: 2 # keep >= 2 in prod\n  maxReplicaCount: 8\n"
	s := files["overlays/prod/scaling.yaml"]
	if !strings.Contains(s, old) {
		t.Fatal("overlays/prod/scaling.yaml changed: update the test")
	}
	files["overlays/prod/scaling.yaml"] = strings.Replace(s, old, repl, 1)
}

// newBare creates dir/name.git whose main branch has one commit with files.
func newBare(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	bare := filepath.Join(dir, "repo.git")
	gitOut(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	work := filepath.Join(dir, "seed")
	gitOut(t, dir, "clone", "-q", bare, work)
	writeFiles(t, work, files)
	gitOut(t, work, "add", "-A")
	gitOut(t, work, "commit", "-q", "-m", "initial")
	gitOut(t, work, "push", "-q", "origin", "HEAD:refs/heads/main")
	return bare
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func clone(t testing.TB, bare string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "w")
	gitOut(t, filepath.Dir(bare), "clone", "-q", bare, work)
	return work
}

func fsck(t testing.TB, repo string) {
	t.Helper()
	if out := gitOut(t, repo, "fsck", "--strict", "--no-dangling"); out != "" {
		t.Fatalf("git fsck --strict: %s", out)
	}
}

func fileRemote(t testing.TB, bare string) *gitrepo.Remote {
	t.Helper()
	r, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: "file://" + bare})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// headSnapshot reads main of the bare repository.
func headSnapshot(t testing.TB, bare string) *gitrepo.Snapshot {
	t.Helper()
	repo, err := gitrepo.Open("file://" + bare)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := repo.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func loadProd(t testing.TB, bare string) *Schedule {
	t.Helper()
	s, err := Load(headSnapshot(t, bare), "prod")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func osReadFile(p string) ([]byte, error) { return os.ReadFile(p) }
