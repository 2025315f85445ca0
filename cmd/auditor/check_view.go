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
	if f, ok := w.(*os.File); ok && isTerminal(w) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			return cols
		}
	}
	return defaultWidth
}

// touched is what a change touches: the objects its render changes, as findings name them
// ("Kind namespace/name" or "Kind name"), and the files it edits (check.Result.Paths).
type touched struct{ objects, paths map[string]bool }

// touchedBy is what paths and the changes of sets touch.
func touchedBy(paths []string, sets ...[]check.Change) touched {
	t := touched{objects: map[string]bool{}, paths: map[string]bool{}}
	for _, p := range paths {
		t.paths[p] = true
	}
	for _, cs := range sets {
		for _, c := range cs {
			if c.Namespace == "" {
				t.objects[c.Kind+" "+c.Name] = true
			} else {
				t.objects[c.Kind+" "+c.Namespace+"/"+c.Name] = true
			}
		}
	}
	return t
}

// on reports whether finding f is on what the change touches: an object it changes, or a file
// it edits (a file-level finding names the file, sometimes as "file PATH").
func (t touched) on(f check.Violation) bool {
	return t.objects[f.Object] || t.paths[strings.TrimPrefix(f.Object, "file ")]
}

// listed are the at-risk warnings the quiet view listed already: by env, rule and object (the
// same warning at an env's pin and at its next promotion), and by rule, object and message (the
// same warning in another env). A warning listed once is counted after.
type listed map[string]bool

func (l listed) has(env string, f check.Violation) bool {
	return l[env+"|"+f.Rule+"|"+f.Object] || l[f.Rule+"|"+f.Object+"|"+f.Message]
}

func (l listed) add(env string, f check.Violation) {
	l[env+"|"+f.Rule+"|"+f.Object], l[f.Rule+"|"+f.Object+"|"+f.Message] = true, true
}

// pick parts env's warnings ws into those the quiet view lists and the rest, counted: listed
// are those on what the change touches, and those at risk (check.Violation.Risk) not in seen,
// which it fills.
func (t touched) pick(env string, ws []check.Violation, seen listed) (shown, rest []check.Violation) {
	for _, f := range ws {
		switch {
		case t.on(f):
			shown = append(shown, f)
		case f.Risk != "" && !seen.has(env, f):
			seen.add(env, f)
			f.Message += " (at risk: " + f.Risk + ")"
			shown = append(shown, f)
		default:
			rest = append(rest, f)
		}
	}
	return shown, rest
}

// writeSummary prints what the quiet view leaves out: as text, one line saying how many of which
// rules (--verbose lists them); as Markdown, where --verbose cannot be run, a collapsed list.
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
	line := fmt.Sprintf("%s, %s (%s)", count(len(vs), word), what, strings.Join(rules, ", "))
	if v.md {
		fmt.Fprintf(w, "\n<details><summary>%s</summary>\n\n", line)
		v.writeFindings(w, "", ":warning:", vs)
		fmt.Fprint(w, "\n</details>\n\n")
		return
	}
	fmt.Fprint(w, wrap("  "+line+"; --verbose lists them", v.width, "    "))
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

// wrapped runs write and prints what it wrote, as text each line wrapped to the width (Markdown
// tables stay whole).
func (v checkView) wrapped(w io.Writer, write func(io.Writer)) {
	var b strings.Builder
	write(&b)
	if v.md {
		fmt.Fprint(w, b.String())
		return
	}
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line = strings.TrimSuffix(line, "\n"); line != "" {
			fmt.Fprint(w, wrap(line, v.width, "    "))
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
