package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// ledgerRepo is a bare repository with the project's manifests, and a CLI work tree of it.
type ledgerRepo struct {
	t          *testing.T
	bare, work string
	n          int
}

func (l *ledgerRepo) git(date time.Time, args ...string) string {
	l.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = l.work
	cmd.Env = append(os.Environ(), "HOME="+l.work, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@example.com",
		"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@example.com",
		"GIT_AUTHOR_DATE="+date.Format(time.RFC3339), "GIT_COMMITTER_DATE="+date.Format(time.RFC3339))
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

var ledgerT0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// commit commits the work tree at ledgerT0 + n hours and pushes; it returns the sha.
func (l *ledgerRepo) commit(msg string) string {
	l.t.Helper()
	when := ledgerT0.Add(time.Duration(l.n) * time.Hour)
	if l.n > 0 {
		l.git(when, "pull", "-q", "--ff-only", "origin", "main")
	}
	l.git(when, "add", "-A")
	l.git(when, "commit", "-q", "-m", msg)
	l.git(when, "push", "-q", "origin", "HEAD:refs/heads/main")
	l.n++
	return l.git(when, "rev-parse", "HEAD")
}

func newLedgerRepo(t *testing.T) *ledgerRepo {
	dir := t.TempDir()
	l := &ledgerRepo{t: t, bare: filepath.Join(dir, "platform.git"), work: filepath.Join(dir, "work")}
	if err := os.MkdirAll(l.work, 0o755); err != nil {
		t.Fatal(err)
	}
	l.git(ledgerT0, "init", "-q", "--bare", "-b", "main", l.bare)
	l.git(ledgerT0, "init", "-q", "-b", "main", ".")
	l.git(ledgerT0, "remote", "add", "origin", l.bare)
	copyTree(t, l.work, ".auditor.yaml", "base", "components", "overlays", "policies", "docs/runbooks") // what a promotion's check reads
	l.commit("platform")
	return l
}

func (l *ledgerRepo) setCanary(stable, canary string) {
	l.t.Helper()
	p := filepath.Join(l.work, "overlays/prod/canary/route-split.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		l.t.Fatal(err)
	}
	s := strings.Replace(string(b), "weight: 90", "weight: "+stable, 1)
	s = strings.Replace(s, "weight: 10", "weight: "+canary, 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// runCmd runs a command in-process and returns its stdout and error.
func runCmd(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// copyTree copies the repository's top-level directories tops into dst.
func copyTree(t *testing.T, dst string, tops ...string) {
	t.Helper()
	for _, top := range tops {
		err := filepath.Walk(filepath.Join("..", "..", top), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join("..", ".."), p)
			to := filepath.Join(dst, rel)
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return err
			}
			return os.WriteFile(to, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
