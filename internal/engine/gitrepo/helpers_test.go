package gitrepo

import (
	"strconv"
	"strings"
	"testing"

	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// The git CLI helpers live in internal/testing/gittest, shared with the other packages' Git tests.
func gitOut(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return gittest.Run(t, dir, args...)
}

func gitTry(dir string, args ...string) (string, error) { return gittest.Try(dir, args...) }

func gitEnv(home string) []string { return gittest.Env(home) }

func newBare(t testing.TB, dir, name string, files map[string]string) string {
	t.Helper()
	return gittest.NewBare(t, dir, name, files)
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	gittest.WriteFiles(t, dir, files)
}

func clone(t testing.TB, bare string) string { t.Helper(); return gittest.Clone(t, bare) }

func fsck(t testing.TB, repo string) { t.Helper(); gittest.Fsck(t, repo) }

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
