package gitrepo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// gitEnv isolates the git CLI from the user's and system configuration.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Human", "GIT_AUTHOR_EMAIL=human@example.com",
		"GIT_COMMITTER_NAME=Human", "GIT_COMMITTER_EMAIL=human@example.com",
		"GIT_TERMINAL_PROMPT=0")
}

// gitOut runs the git CLI in dir and returns its trimmed output; it fails the test on error.
func gitOut(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitTry(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

func gitTry(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv(dir)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// newBare creates a bare repository (dir/<name>) whose main branch has one commit with files.
// It returns the bare repository's path.
func newBare(t testing.TB, dir, name string, files map[string]string) string {
	t.Helper()
	bare := filepath.Join(dir, name)
	gitOut(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	work := filepath.Join(t.TempDir(), "seed")
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

// clone makes a CLI work tree of bare.
func clone(t testing.TB, bare string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "w")
	gitOut(t, filepath.Dir(bare), "clone", "-q", bare, work)
	return work
}

// fsck runs git fsck --strict on the repository and fails on any complaint.
func fsck(t testing.TB, repo string) {
	t.Helper()
	out := gitOut(t, repo, "fsck", "--strict", "--no-dangling")
	if out != "" {
		t.Fatalf("git fsck --strict: %s", out)
	}
}

func fileRemote(t testing.TB, bare string) *Remote {
	t.Helper()
	r, err := NewRemote(RemoteConfig{URL: "file://" + bare})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var bot = Person{Name: "Auditor Bot", Email: "auditor@example.com"}

// lines makes a file of n numbered lines.
func lines(n int, override map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := override[i]; ok {
			b.WriteString(s + "\n")
			continue
		}
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	return b.String()
}

func setLine(content string, n int, s string) string {
	ls := strings.SplitAfter(content, "\n")
	ls[n-1] = s + "\n"
	return strings.Join(ls, "")
}
