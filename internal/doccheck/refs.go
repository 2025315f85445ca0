package doccheck

import (
	"regexp"
	"strings"
)

// Finding is one thing a reader cannot follow, on a line of a document.
type Finding struct {
	// Line is the 1-based line it is on.
	Line int
	// Kind says what it is: "issue" (an issue number or an issue's notes) or "commit" (a hash).
	Kind string
	// Text is what matched.
	Text string
}

var (
	issuePatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?:^|\s|\()#\d+\b`),
		regexp.MustCompile(`(?i)\bissues?\s+#?\d+\b`),
		regexp.MustCompile(`(?i)\bissue(?:'s)?\s+notes?\b`),
	}
	// A commit hash: 7 to 40 hex digits with at least one letter and one digit, as a word.
	hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)
)

// References finds issue numbers ("#29", "issue 12"), mentions of an issue's notes and commit
// hashes in a Markdown document. Code (fenced blocks and inline spans) is not read: a hash or a
// '#' there is a value, not a reference.
func References(md string) []Finding {
	var out []Finding
	forProse(md, func(n int, line string) {
		for _, re := range issuePatterns {
			for _, m := range re.FindAllString(line, -1) {
				out = append(out, Finding{Line: n, Kind: "issue", Text: strings.TrimSpace(strings.TrimLeft(m, "("))})
			}
		}
		for _, m := range hexWord.FindAllString(line, -1) {
			if strings.ContainsAny(m, "0123456789") && strings.ContainsAny(m, "abcdef") {
				out = append(out, Finding{Line: n, Kind: "commit", Text: m})
			}
		}
	})
	return out
}

// Link is a link or image target in a Markdown document.
type Link struct {
	// Line is the 1-based line it is on.
	Line int
	// Target is the link's destination as written.
	Target string
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	scheme     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// RelativeLinks returns the links of a Markdown document that point into the repository: not
// a URL with a scheme (https:, mailto:), not an anchor of the same page. Their targets keep
// what they were written with; Path takes the file out of one.
func RelativeLinks(md string) []Link {
	var out []Link
	forProse(md, func(n int, line string) {
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if !scheme.MatchString(t) && !strings.HasPrefix(t, "#") {
				out = append(out, Link{Line: n, Target: t})
			}
		}
	})
	return out
}

// Path is the file a relative link's target names, without its #fragment or ?query.
func (l Link) Path() string {
	p := l.Target
	if i := strings.IndexAny(p, "#?"); i >= 0 {
		p = p[:i]
	}
	return p
}

// forProse calls fn with every line outside fenced code blocks, its inline code spans blanked.
func forProse(md string, fn func(n int, line string)) {
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOpening(trimmed); f != "" {
			fence = f
			continue
		}
		fn(i+1, codeSpan.ReplaceAllString(line, "``"))
	}
}
