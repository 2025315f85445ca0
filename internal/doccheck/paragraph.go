package doccheck

import (
	"regexp"
	"strings"
)

// Paragraph is one prose paragraph of a Markdown document: a run of text lines, or one list
// item with its continuation lines.
type Paragraph struct {
	// Text is the paragraph's lines joined by spaces, the list marker and quote marks taken off.
	Text string
	// Line is the 1-based line the paragraph starts on.
	Line int
	// Lines is how many source lines it spans.
	Lines int
}

var (
	listMarker   = regexp.MustCompile(`^\s*(?:[-*+]|\d{1,9}[.)])\s+`)
	heading      = regexp.MustCompile(`^\s{0,3}#{1,6}(?:\s|$)`)
	thematic     = regexp.MustCompile(`^\s{0,3}(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,})$`)
	imageOnly    = regexp.MustCompile(`^\s*!\[[^\]]*\]\([^)]*\)\s*$`)
	linkDef      = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*\S+`)
	quoteMarkers = regexp.MustCompile(`^\s{0,3}(?:>\s?)+`)
)

// Paragraphs returns the prose paragraphs of a Markdown document, in order. Fenced code blocks
// (``` or ~~~), tables, headings, thematic breaks, HTML comments, lone images and link
// definitions are not prose and end the paragraph before them. Each list item is a paragraph
// of its own, without its marker; lines after it that are not blank continue it.
func Paragraphs(md string) []Paragraph {
	var (
		out     []Paragraph
		cur     []string
		start   int
		fence   string
		comment bool
	)
	flush := func() {
		if len(cur) > 0 {
			out = append(out, Paragraph{Text: strings.Join(cur, " "), Line: start, Lines: len(cur)})
		}
		cur = nil
	}
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		line = strings.TrimRight(line, " \t\r")
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if comment {
			comment = !strings.Contains(line, "-->")
			continue
		}
		if f := fenceOpening(trimmed); f != "" {
			flush()
			fence = f
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "<!--"):
			flush()
			comment = !strings.Contains(trimmed, "-->")
			continue
		case trimmed == "", heading.MatchString(line), strings.HasPrefix(trimmed, "|"),
			thematic.MatchString(line), imageOnly.MatchString(line), linkDef.MatchString(line):
			flush()
			continue
		}
		text := quoteMarkers.ReplaceAllString(line, "")
		if m := listMarker.FindString(text); m != "" {
			flush()
			text = text[len(m):]
		}
		if len(cur) == 0 {
			start = n
		}
		cur = append(cur, strings.TrimSpace(text))
	}
	flush()
	return out
}

// fenceOpening returns the fence a line opens (three or more backticks or tildes), or "".
func fenceOpening(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(trimmed, c+c+c) {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
			return strings.Repeat(c, n)
		}
	}
	return ""
}
