package adopt

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// TestUnifiedDiffAppliesWithGit: random edits of random files (insertions, deletions and changes
// at the start, middle and end, hunks close together and far apart, files with and without a
// final newline, new files) each give a diff that `git apply` takes and that makes the file the
// new content.
func TestUnifiedDiffAppliesWithGit(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 6))
	dir := gittest.Clone(t, gittest.NewBare(t, t.TempDir(), "platform.git", map[string]string{"README": "x\n"}))
	applied := 0
	for i := range 150 {
		before := randomFile(rng, rng.IntN(30))
		after := mutate(rng, before)
		var c fileChange
		name := fmt.Sprintf("f%d.yaml", i)
		if i%10 == 0 {
			c = fileChange{path: name, after: []byte(after)}
		} else {
			c = fileChange{path: name, before: []byte(before), after: []byte(after)}
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(before), 0o644))
		}
		if c.before != nil && before == after {
			continue
		}
		diff, err := unifiedDiff([]fileChange{c})
		require.NoError(t, err)
		p := filepath.Join(t.TempDir(), "d.diff")
		require.NoError(t, os.WriteFile(p, []byte(diff), 0o644))
		if out, err := gittest.Try(dir, "apply", p); err != nil {
			t.Fatalf("case %d: git apply: %v\n%s\nbefore:\n%q\nafter:\n%q\ndiff:\n%s", i, err, out, before, after, diff)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, after, string(got), "case %d, diff:\n%s", i, diff)
		applied++
	}
	require.Greater(t, applied, 120)
}

func randomFile(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "line %d\n", rng.IntN(8)) // repeated lines make the diff's alignment choices matter
	}
	s := b.String()
	if n > 0 && rng.IntN(3) == 0 {
		s = strings.TrimSuffix(s, "\n")
	}
	return s
}

// mutate inserts, deletes and changes a few lines, and sometimes adds or drops the final newline.
func mutate(rng *rand.Rand, s string) string {
	lines := splitLines(s)
	for range 1 + rng.IntN(4) {
		at := rng.IntN(len(lines) + 1)
		switch op := rng.IntN(3); {
		case op == 0 || len(lines) == 0:
			lines = append(lines[:at], append([]string{fmt.Sprintf("new %d", rng.IntN(100))}, lines[at:]...)...)
		case op == 1 && at < len(lines):
			lines = append(lines[:at], lines[at+1:]...)
		case at < len(lines):
			lines[at] = fmt.Sprintf("changed %d", rng.IntN(100))
		}
	}
	out := strings.Join(lines, "\n")
	if len(lines) > 0 && (strings.HasSuffix(s, "\n") || s == "") != (rng.IntN(4) == 0) {
		out += "\n"
	}
	return out
}
