package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/platform/check"
)

// writeCheck prints the check's result per env, as text or as a Markdown comment (v.md). Unless
// v.verbose, it lists only the findings on what the change touches and counts the rest.
func writeCheck(w io.Writer, res *check.Result, v checkView) {
	md := v.md
	h := func(level int, s string) {
		if md {
			fmt.Fprintf(w, "%s %s\n\n", strings.Repeat("#", level), s)
		} else {
			fmt.Fprint(w, wrap("== "+s, v.width, "   "))
		}
	}
	verdict := "PASS"
	switch {
	case len(res.Errors) > 0:
		verdict = "ERROR"
	case !res.Passed:
		verdict = "FAIL"
	}
	head := gitrepo.Short(res.Head)
	if res.WorkTree != "" {
		head = "work tree"
	}
	h(2, fmt.Sprintf("auditor check: %s (%s → %s)", verdict, gitrepo.Short(res.Base), head))
	if len(res.Errors) > 0 {
		fmt.Fprintf(w, "Not checked: %s.\n\n", strings.Join(res.Errors, "; "))
	}
	if fails := failing(res); len(fails) > 0 {
		fmt.Fprintf(w, "Fails: %s.\n\n", strings.Join(fails, "; "))
	}
	if res.Fork != "" {
		fmt.Fprintf(w, "Violations already there at %s, where the head forked from %s, are inherited: listed, not failing.\n\n",
			gitrepo.Short(res.Fork), gitrepo.Short(res.Base))
	}
	var stacks gpuStacks
	seen := listed{}
	for _, e := range res.Envs {
		if e.Error != "" {
			h(3, e.Env+": not checked")
			fmt.Fprintf(w, "  ERROR %s\n\n", e.Error)
			continue
		}
		if e.Skipped != "" {
			h(3, e.Env+": not checked")
			fmt.Fprintf(w, "  NOTE %s\n\n", e.Skipped)
			continue
		}
		pinned := ""
		if e.Next != nil {
			pinned = " at its pin " + gitrepo.Short(e.Revision)
		}
		h(3, fmt.Sprintf("%s%s: %s changed, %s", e.Env, pinned, count(len(e.Changes), "object"), count(len(e.Violations), "violation")))
		v.writeFindings(w, "VIOLATION", ":x:", e.Violations)
		v.writeInherited(w, e.Inherited, e.ForkError, "broken before this change")
		v.writeForcedAndOff(w, e, touchedBy(res.Paths, e.Changes, e.Apps), seen)
		stacks.add(e.Env, "", e.GPUStack)
		if v.verbose {
			v.wrapped(w, func(w io.Writer) {
				writeAlsoRendered(w, e.Applications)
				writeSecurity(w, e.Security, md)
				writeGPUPools(w, e.GPUPools, md)
				check.WriteKVCache(w, e.KVCache, md)
			})
		}
		writeRendered(w, e, md)
		if e.Next != nil {
			v.writeNext(w, h, e, head, touchedBy(res.Paths, e.Next.Introduced), seen)
			stacks.add(e.Env, " at next promotion", e.Next.GPUStack)
		}
	}
	stacks.write(w, v)
}

// writeRendered prints what changes in e's render and in what its root syncs (folded in Markdown).
func writeRendered(w io.Writer, e check.EnvResult, md bool) {
	if md && len(e.Changes)+len(e.Apps) > 0 {
		fmt.Fprintln(w, "\n<details><summary>rendered changes</summary>\n\n```diff")
	}
	writeChanges(w, e.Changes)
	if len(e.Apps) > 0 {
		if e.Next != nil { // pinned: what the root syncs reaches the env from the branch
			fmt.Fprintf(w, "%s (synced from main, unpinned): %s changed\n", e.AppsPath, count(len(e.Apps), "object"))
		} else {
			fmt.Fprintf(w, "%s (what the root syncs): %s changed\n", e.AppsPath, count(len(e.Apps), "object"))
		}
		writeChanges(w, e.Apps)
	}
	if md && len(e.Changes)+len(e.Apps) > 0 {
		fmt.Fprintln(w, "```\n</details>")
	}
	fmt.Fprintln(w)
}

// writeForcedAndOff writes e's findings the promotion was forced past, its warnings (unless
// verbose, see writeWarnings), and those of rules the layout turns off, each saying so.
func (v checkView) writeForcedAndOff(w io.Writer, e check.EnvResult, t touched, seen listed) {
	forced := make([]check.Violation, len(e.Forced))
	for i, f := range e.Forced {
		f.Message += " (the promotion was forced past it: " + e.ForcedReason + ")"
		forced[i] = f
	}
	v.writeFindings(w, "FORCED", ":warning:", forced)
	v.writeWarnings(w, e.Env, e.Warnings, t, seen) // reported, not failing the check
	off := make([]check.Violation, len(e.Silenced))
	for i, s := range e.Silenced {
		s.Message += " (rule off in " + layout.LayoutFile + ": " + s.Reason + ")"
		off[i] = s.Violation
	}
	v.writeFindings(w, "OFF", ":no_entry_sign:", off)
}

// writeWarnings writes the warnings: unless verbose, those on what the change touches and
// those at risk (touched.pick), and a count of the rest.
func (v checkView) writeWarnings(w io.Writer, env string, ws []check.Violation, t touched, seen listed) {
	if v.verbose {
		v.writeFindings(w, "WARNING", ":warning:", ws)
		return
	}
	shown, rest := t.pick(env, ws, seen)
	v.writeFindings(w, "WARNING", ":warning:", shown)
	word, what := "warning", "none on what this change touches"
	if len(shown) > 0 {
		word, what = "more warning", "on what this change leaves alone"
	}
	v.writeSummary(w, word, what, rest)
}

// writeAlsoRendered writes the other Applications rendered and checked with the env, those
// that rendered, if any.
func writeAlsoRendered(w io.Writer, apps []check.AppRender) {
	if len(apps) > 0 {
		var parts []string
		for _, a := range apps {
			if a.Error == "" {
				parts = append(parts, fmt.Sprintf("%s (%s, %s)", a.Name, a.Path, count(a.Objects, "object")))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "  also rendered and checked: %s\n", strings.Join(parts, ", "))
		}
	}
}
