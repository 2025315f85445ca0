package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's top, from this package's directory.
const repoRoot = "../.."

// Readability bounds: a reader's README, as the Go projects we follow write theirs.
const (
	maxMedianSentence = 20 // words; the median must stay under it
	maxSentence       = 40 // words; a longer one is a list or two sentences
	maxParagraphLines = 8
)

// documents are every Markdown file a reader of the forge meets: the README, CONTRIBUTING.md
// and everything under docs/.
func documents(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// shortProse are the documents held to short sentences and short paragraphs: the README and
// the pages written for its readers.
func shortProse(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "docs/install.md", "docs/benchmarks.md", "docs/local-cluster.md", "docs/audit.md"}
	ref, err := filepath.Glob(filepath.Join(repoRoot, "docs", "reference", "*.md"))
	require.NoError(t, err)
	for _, f := range ref {
		rel, err := filepath.Rel(repoRoot, f)
		require.NoError(t, err)
		files = append(files, rel)
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	require.NoError(t, err)
	return string(b)
}

func TestProseHasShortSentencesAndParagraphs(t *testing.T) {
	for _, f := range shortProse(t) {
		t.Run(f, func(t *testing.T) {
			md := read(t, f)
			lengths := SentenceLengths(md)
			require.NotEmpty(t, lengths, "no prose found")
			median := Median(lengths)
			t.Logf("%s: %d lines, %d sentences, median %.1f words", f, strings.Count(md, "\n"), len(lengths), median)
			assert.Less(t, median, float64(maxMedianSentence), "median sentence length in words")
			for _, p := range Paragraphs(md) {
				assert.LessOrEqual(t, p.Lines, maxParagraphLines, "%s:%d: a paragraph of %d lines: split it", f, p.Line, p.Lines)
				for _, s := range Sentences(p.Text) {
					assert.LessOrEqual(t, Words(s), maxSentence, "%s:%d: a sentence of %d words: %.80q", f, p.Line, Words(s), s)
				}
			}
		})
	}
}

func TestDocsNameNoIssuesOrCommits(t *testing.T) {
	for _, f := range documents(t) {
		for _, r := range References(read(t, f)) {
			assert.Failf(t, "a reference readers cannot follow", "%s:%d: %s %q: say what it means instead", f, r.Line, r.Kind, r.Text)
		}
	}
}

func TestRelativeLinksPointAtFiles(t *testing.T) {
	for _, f := range documents(t) {
		for _, l := range RelativeLinks(read(t, f)) {
			p := l.Path()
			if p == "" {
				continue
			}
			rel := filepath.ToSlash(filepath.Join(filepath.Dir(f), filepath.FromSlash(p)))
			_, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(rel)))
			assert.NoError(t, err, "%s:%d: link to %s", f, l.Line, l.Target)
		}
	}
}
