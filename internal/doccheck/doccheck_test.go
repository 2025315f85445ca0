package doccheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParagraphsSkipWhatIsNotProse(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []Paragraph
	}{
		{
			name: "lines joined until a blank line",
			md:   "One line\nand the next.\n\nAnother.",
			want: []Paragraph{{Text: "One line and the next.", Line: 1, Lines: 2}, {Text: "Another.", Line: 4, Lines: 1}},
		},
		{
			name: "a heading is no prose and ends the paragraph",
			md:   "Before.\n## Title\nAfter.",
			want: []Paragraph{{Text: "Before.", Line: 1, Lines: 1}, {Text: "After.", Line: 3, Lines: 1}},
		},
		{
			name: "a fenced block is skipped whole, its blank lines included",
			md:   "Text.\n```sh\nmake demo. Not prose.\n\nStill code.\n```\nMore.",
			want: []Paragraph{{Text: "Text.", Line: 1, Lines: 1}, {Text: "More.", Line: 7, Lines: 1}},
		},
		{
			name: "a longer fence is closed only by as long a fence",
			md:   "````md\n```\ninner\n```\n````\nAfter.",
			want: []Paragraph{{Text: "After.", Line: 6, Lines: 1}},
		},
		{
			name: "a tilde fence",
			md:   "~~~\ncode\n~~~\nText.",
			want: []Paragraph{{Text: "Text.", Line: 4, Lines: 1}},
		},
		{
			name: "a table is skipped",
			md:   "Intro.\n| a | b |\n|---|---|\n| 1 | 2 |\nOutro.",
			want: []Paragraph{{Text: "Intro.", Line: 1, Lines: 1}, {Text: "Outro.", Line: 5, Lines: 1}},
		},
		{
			name: "each list item is a paragraph, without its marker, continuation lines included",
			md:   "- first item\n  goes on.\n- second.\n3. third.\n* fourth.",
			want: []Paragraph{
				{Text: "first item goes on.", Line: 1, Lines: 2},
				{Text: "second.", Line: 3, Lines: 1},
				{Text: "third.", Line: 4, Lines: 1},
				{Text: "fourth.", Line: 5, Lines: 1},
			},
		},
		{
			name: "a quote's markers are taken off",
			md:   "> Quoted\n> text.",
			want: []Paragraph{{Text: "Quoted text.", Line: 1, Lines: 2}},
		},
		{
			name: "images alone, link definitions, rules and comments are skipped",
			md:   "![alt](img.png)\n\n[ref]: docs/x.md\n---\n<!-- a\ncomment -->\nText.",
			want: []Paragraph{{Text: "Text.", Line: 7, Lines: 1}},
		},
		{
			name: "nothing",
			md:   "",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Paragraphs(tt.md))
		})
	}
}

func TestSentencesSplitOnlyWhereASentenceEnds(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"two sentences", "It renders. It compares.", []string{"It renders.", "It compares."}},
		{"question and exclamation", "Drift? Yes! Report it.", []string{"Drift?", "Yes!", "Report it."}},
		{"a decimal is no end", "It takes 0.3 s. Then more.", []string{"It takes 0.3 s.", "Then more."}},
		{"an abbreviation is no end", "Kinds, e.g. Deployments. Next.", []string{"Kinds, e.g. Deployments.", "Next."}},
		{"a lower-case next word is no end", "See the docs. at the end.", []string{"See the docs. at the end."}},
		{"a code span holds its periods", "Run `make build. Then` now. Done.", []string{"Run `make build. Then` now.", "Done."}},
		{"a double-backtick span", "Run ``a `b`. C`` now. Done.", []string{"Run ``a `b`. C`` now.", "Done."}},
		{"closing brackets and quotes stay with the sentence", `It says "in sync." (Both agree.) Next.`, []string{`It says "in sync."`, "(Both agree.)", "Next."}},
		{"a sentence may start with code", "It fails. `check` says why.", []string{"It fails.", "`check` says why."}},
		{"no final period", "Exit 0 in sync", []string{"Exit 0 in sync"}},
		{"versions and file names", "Uses v1.37.2 and docs/install.md here.", []string{"Uses v1.37.2 and docs/install.md here."}},
		{"empty", "  ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Sentences(tt.text))
		})
	}
}

func TestWordsCountWhatAReaderReads(t *testing.T) {
	tests := []struct {
		name     string
		sentence string
		want     int
	}{
		{"plain words", "The auditor reads Git.", 4},
		{"a code span is one word", "Run `go test -run '^$' ./internal/doccheck` once.", 3},
		{"a link counts its text", "See [the install guide](docs/install.md).", 4},
		{"an image counts its alt text", "![web view](docs/img/webview.png)", 2},
		{"punctuation alone is no word", "Git → render — live + drift", 4},
		{"numbers are words", "It took 15 min on 2 cores.", 7},
		{"nothing", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Words(tt.sentence))
		})
	}
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 0.0, Median(nil))
	assert.Equal(t, 3.0, Median([]int{5, 1, 3}))
	assert.Equal(t, 2.5, Median([]int{4, 1, 3, 2}))
	in := []int{3, 1, 2}
	Median(in)
	assert.Equal(t, []int{3, 1, 2}, in, "the counts are not reordered")
}

func TestSentenceLengthsReadProseOnly(t *testing.T) {
	md := "# A heading of many words here\nOne two three. Four five.\n\n```\nnot counted at all here\n```\n- six seven\n"
	assert.Equal(t, []int{3, 2, 2}, SentenceLengths(md))
}

func TestReferencesFindIssuesAndCommitsOutsideCode(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []Finding
	}{
		{"an issue number", "Fixed in #29 at last.", []Finding{{Line: 1, Kind: "issue", Text: "#29"}}},
		{"in brackets", "A note (#7).", []Finding{{Line: 1, Kind: "issue", Text: "#7"}}},
		{"at a line's start", "#12 says so.", []Finding{{Line: 1, Kind: "issue", Text: "#12"}}},
		{"issue N", "See issue 12.", []Finding{{Line: 1, Kind: "issue", Text: "issue 12"}}},
		{"the issue notes", "The issue notes have the rest.", []Finding{{Line: 1, Kind: "issue", Text: "issue notes"}}},
		{"a commit hash", "Measured on\n84f97af then.", []Finding{{Line: 2, Kind: "commit", Text: "84f97af"}}},
		{"a heading's '#' is no issue", "## 2 cores", nil},
		{"an anchor is no issue", "See [x](#usage) and a#1.", nil},
		{"inline code is not read", "Run `git revert 84f97af` or `#29`.", nil},
		{"a fenced block is not read", "```\nissue 12 #29 84f97af\n```", nil},
		{"words and numbers are no hashes", "It took 1000000 ns, a facade.", nil},
		{"cert-manager issues certificates", "It issues from the Certificate.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, References(tt.md))
		})
	}
}

func TestRelativeLinks(t *testing.T) {
	md := "See [install](docs/install.md#image), [a site](https://example.com),\n" +
		"[mail](mailto:a@b.c), [here](#top) and ![img](img/x.svg \"title\").\n" +
		"`[not](a-link.md)`\n```\n[nor](this.md)\n```\n[ref]: ../CONTRIBUTING.md\n"
	links := RelativeLinks(md)
	assert.Equal(t, []Link{
		{Line: 1, Target: "docs/install.md#image"},
		{Line: 2, Target: "img/x.svg"},
		{Line: 7, Target: "../CONTRIBUTING.md"},
	}, links)
	assert.Equal(t, "docs/install.md", links[0].Path())
	assert.Equal(t, "q.md", Link{Target: "q.md?plain=1"}.Path())
}
