package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/llm-gitops/platform/internal/platform/check"
)

// defaultWidth is where text output wraps when it does not go to a terminal.
const defaultWidth = 100

// checkView is how much of a check's result is printed, and how wide.
type checkView struct {
	md bool
	// verbose prints the full inventory: every warning and inherited violation, the other
	// Applications rendered, what each namespace enforces, the GPU pools and the KV cache.
	verbose bool
	// width is where text lines wrap; 0 does not wrap.
	width int
}

// outputWidth is the width of w's terminal, or defaultWidth when w is not one.
func outputWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			return cols
		}
	}
	return defaultWidth
}

// changedObjects is the set of objects the changes touch, as findings name them
// ("Kind namespace/name" or "Kind name").
func changedObjects(sets ...[]check.Change) map[string]bool {
	out := map[string]bool{}
	for _, cs := range sets {
		for _, c := range cs {
			if c.Namespace == "" {
				out[c.Kind+" "+c.Name] = true
			} else {
				out[c.Kind+" "+c.Namespace+"/"+c.Name] = true
			}
		}
	}
	return out
}

// split parts vs into the findings on changed objects and the rest.
func split(vs []check.Violation, changed map[string]bool) (shown, rest []check.Violation) {
	for _, v := range vs {
		if changed[v.Object] {
			shown = append(shown, v)
		} else {
			rest = append(rest, v)
		}
	}
	return shown, rest
}

// writeSummary prints one line for findings left out of the quiet view: how many, of which rules.
func (v checkView) writeSummary(w io.Writer, word, what string, vs []check.Violation) {
	if len(vs) == 0 {
		return
	}
	var rules []string
	n := map[string]int{}
	for _, f := range vs {
		if n[f.Rule] == 0 {
			rules = append(rules, f.Rule)
		}
		n[f.Rule]++
	}
	for i, r := range rules {
		if n[r] > 1 {
			rules[i] = fmt.Sprintf("%s ×%d", r, n[r])
		}
	}
	line := fmt.Sprintf("%s, %s (%s); --verbose lists them", count(len(vs), word), what, strings.Join(rules, ", "))
	if v.md {
		fmt.Fprintf(w, "- %s\n", line)
		return
	}
	fmt.Fprint(w, wrap("  "+line, v.width, "    "))
}

// writeFindings prints violations or warnings: as text, grouped by rule and wrapped; as a
// Markdown list item each with the emoji.
func (v checkView) writeFindings(w io.Writer, word, emoji string, vs []check.Violation) {
	if v.md {
		for _, f := range vs {
			fmt.Fprintf(w, "- %s **%s** `%s`: %s\n", emoji, f.Rule, f.Object, f.Message)
		}
		return
	}
	var rules []string
	byRule := map[string][]check.Violation{}
	for _, f := range vs {
		if byRule[f.Rule] == nil {
			rules = append(rules, f.Rule)
		}
		byRule[f.Rule] = append(byRule[f.Rule], f)
	}
	for _, r := range rules {
		fs := byRule[r]
		if len(fs) == 1 {
			fmt.Fprint(w, wrap(fmt.Sprintf("  %s %s %s: %s", word, r, fs[0].Object, fs[0].Message), v.width, "    "))
			continue
		}
		fmt.Fprintf(w, "  %s %s (%d):\n", word, r, len(fs))
		for _, f := range fs {
			fmt.Fprint(w, wrap(fmt.Sprintf("    %s: %s", f.Object, f.Message), v.width, "      "))
		}
	}
}

// wrap breaks s at spaces into lines of at most width columns (a longer word stays whole), the
// lines after the first indented; each line ends in a newline. A width of 0 does not wrap.
func wrap(s string, width int, indent string) string {
	if width <= 0 || len([]rune(s)) <= width {
		return s + "\n"
	}
	rest := strings.TrimLeft(s, " ")
	words := strings.Fields(rest)
	var b strings.Builder
	line := s[:len(s)-len(rest)] + words[0]
	for _, word := range words[1:] {
		if len([]rune(line))+1+len([]rune(word)) > width {
			b.WriteString(line + "\n")
			line = indent + word
			continue
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
	return b.String()
}
