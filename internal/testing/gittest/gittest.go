// Package gittest plays the humans in Git tests: the real git CLI, isolated from the user's and
// the system's configuration, on bare repositories and clones in temporary directories.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Env is the environment of a git CLI run: no system or global configuration, a fixed human
// identity, no terminal prompts.
func Env(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Human", "GIT_AUTHOR_EMAIL=human@example.com",
		"GIT_COMMITTER_NAME=Human", "GIT_COMMITTER_EMAIL=human@example.com",
		"GIT_TERMINAL_PROMPT=0")
}

// Try runs git in dir and returns its trimmed combined output.
func Try(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = Env(dir)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Run runs git in dir and fails the test on error.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Try(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

// WriteFiles writes files (slash-separated path -> content) under dir.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
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

// NewBare creates the bare repository dir/name whose main branch has one commit holding files,
// and returns its path.
func NewBare(t testing.TB, dir, name string, files map[string]string) string {
	t.Helper()
	bare := filepath.Join(dir, name)
	Run(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	work := filepath.Join(t.TempDir(), "seed")
	Run(t, dir, "clone", "-q", bare, work)
	WriteFiles(t, work, files)
	Run(t, work, "add", "-A")
	Run(t, work, "commit", "-q", "-m", "initial")
	Run(t, work, "push", "-q", "origin", "HEAD:refs/heads/main")
	return bare
}

// Clone makes a work tree of bare, as a person would.
func Clone(t testing.TB, bare string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "w")
	Run(t, filepath.Dir(bare), "clone", "-q", bare, work)
	return work
}

// Fsck runs git fsck --strict on the repository and fails on any complaint.
func Fsck(t testing.TB, repo string) {
	t.Helper()
	if out := Run(t, repo, "fsck", "--strict", "--no-dangling"); out != "" {
		t.Fatalf("git fsck --strict: %s", out)
	}
}

// HTTPServer serves the repositories under root over Git's smart HTTP protocol — the real
// `git http-backend` behind net/http/cgi — requiring HTTP basic auth user:pass. Pushing needs
// `git config http.receivepack true` in the bare repository.
func HTTPServer(t testing.TB, root, user, pass string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(HTTPHandler(t, root, user, pass))
	t.Cleanup(srv.Close)
	return srv
}

// HTTPHandler is HTTPServer's handler, for tests that put something in front of it.
func HTTPHandler(t testing.TB, root, user, pass string) http.Handler {
	t.Helper()
	execPath := Run(t, root, "--exec-path")
	backend := &cgi.Handler{
		Path:       filepath.Join(execPath, "git-http-backend"),
		Env:        []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root},
		InheritEnv: []string{"PATH"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
}

// ReadTree reads the files under the folders tops of root (slash-separated path relative to root
// -> content): a copy of the repository's own manifests for WriteFiles to lay down elsewhere.
func ReadTree(t testing.TB, root string, tops ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, top := range tops {
		err := filepath.Walk(filepath.Join(root, top), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			files[filepath.ToSlash(rel)] = string(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}
