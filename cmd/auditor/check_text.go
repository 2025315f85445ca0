package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/llm-gitops/platform/internal/check"
	"github.com/llm-gitops/platform/internal/gitrepo"
)

// writeCheck prints the check's result per env, as text or as a Markdown comment (md).
func writeCheck(w io.Writer, res *check.Result, md bool) {
	h := func(level int, s string) {
		if md {
			fmt.Fprintf(w, "%s %s\n\n", strings.Repeat("#", level), s)
		} else {
			fmt.Fprintf(w, "== %s\n", s)
		}
	}
	verdict := "PASS"
	if !res.Passed {
		verdict = "FAIL"
	}
	head := gitrepo.Short(res.Head)
	if res.WorkTree != "" {
		head = "work tree"
	}
	h(2, fmt.Sprintf("auditor check: %s (%s → %s)", verdict, gitrepo.Short(res.Base), head))
	if res.Fork != "" {
		fmt.Fprintf(w, "Violations already there at %s, where the head forked from %s, are inherited: listed, not failing.\n\n",
			gitrepo.Short(res.Fork), gitrepo.Short(res.Base))
	}
	for _, e := range res.Envs {
		pinned := ""
		if e.Next != nil {
			pinned = " at its pin " + gitrepo.Short(e.Revision)
		}
		h(3, fmt.Sprintf("%s%s: %d objects changed, %d violations", e.Env, pinned, len(e.Changes), len(e.Violations)))
		writeFindings(w, md, "VIOLATION", ":x:", e.Violations)
		writeInherited(w, md, e.Inherited, e.ForkError)
		writeFindings(w, md, "WARNING", ":warning:", e.Warnings) // reported, not failing the check
		if len(e.Applications) > 0 {
			var parts []string
			for _, a := range e.Applications {
				if a.Error == "" {
					parts = append(parts, fmt.Sprintf("%s (%s, %d objects)", a.Name, a.Path, a.Objects))
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(w, "  also rendered and checked: %s\n", strings.Join(parts, ", "))
			}
		}
		writeSecurity(w, e.Security, md)
		writeGPUPools(w, e.GPUPools, md)
		check.WriteKVCache(w, e.KVCache, md)
		if md && len(e.Changes)+len(e.Apps) > 0 {
			fmt.Fprintln(w, "\n<details><summary>rendered changes</summary>\n\n```diff")
		}
		writeChanges(w, e.Changes)
		if len(e.Apps) > 0 {
			fmt.Fprintf(w, "apps/%s (synced from main, unpinned): %d objects changed\n", e.Env, len(e.Apps))
			writeChanges(w, e.Apps)
		}
		if md && len(e.Changes)+len(e.Apps) > 0 {
			fmt.Fprintln(w, "```\n</details>")
		}
		fmt.Fprintln(w)
		if e.Next != nil {
			writeNext(w, h, md, e.Env, e.Revision, head, e.Next)
		}
	}
}

// writeNext prints a pinned env at its next promotion: what the promotion would change, what of
// that the checked change brings, and the violations it introduces and inherits.
func writeNext(w io.Writer, h func(int, string), md bool, env, pin, head string, n *check.NextPromotion) {
	h(3, fmt.Sprintf("%s at next promotion (%s → %s): %d objects change (%d by this change), %d violations",
		env, gitrepo.Short(pin), head, len(n.Changes), len(n.Introduced), len(n.Violations)))
	writeFindings(w, md, "VIOLATION", ":x:", n.Violations)
	writeInherited(w, md, n.Inherited, n.ForkError)
	writeFindings(w, md, "WARNING", ":warning:", n.Warnings)
	if len(n.Introduced) > 0 {
		if md {
			fmt.Fprintln(w, "\n<details><summary>what this change does to the next promotion</summary>\n\n```diff")
		}
		writeChanges(w, n.Introduced)
		if md {
			fmt.Fprintln(w, "```\n</details>")
		}
	}
	fmt.Fprintln(w)
}

// writeInherited prints the violations the env had before the change (they do not fail it), or
// why none could be known.
func writeInherited(w io.Writer, md bool, vs []check.Violation, forkErr string) {
	if forkErr != "" {
		writeFindings(w, md, "NOTE", ":information_source:", []check.Violation{{Rule: "inherited", Object: "fork point", Message: forkErr}})
	}
	writeFindings(w, md, "INHERITED", ":warning:", vs)
}

// writeFindings prints violations or warnings, one a line: as text with the word, or as a
// Markdown list item with the emoji.
func writeFindings(w io.Writer, md bool, word, emoji string, vs []check.Violation) {
	for _, v := range vs {
		if md {
			fmt.Fprintf(w, "- %s **%s** `%s`: %s\n", emoji, v.Rule, v.Object, v.Message)
		} else {
			fmt.Fprintf(w, "  %s %s %s: %s\n", word, v.Rule, v.Object, v.Message)
		}
	}
}

// writeSecurity prints what each namespace enforces: the Pod Security level, the default-deny
// NetworkPolicy and the one that keeps DNS open ("none" where missing; the violations say why).
func writeSecurity(w io.Writer, namespaces []check.NamespaceSecurity, md bool) {
	if len(namespaces) == 0 {
		return
	}
	if md {
		fmt.Fprintln(w, "\n| namespace | Pod Security (enforce) | default deny | DNS egress |\n|---|---|---|---|")
	}
	for _, n := range namespaces {
		if md {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", n.Namespace, orNone(n.PodSecurity), orNone(n.DefaultDeny), orNone(n.DNS))
		} else {
			fmt.Fprintf(w, "  SECURITY %s pod-security=%s default-deny=%s dns=%s\n", n.Namespace, orNone(n.PodSecurity), orNone(n.DefaultDeny), orNone(n.DNS))
		}
	}
}

// writeGPUPools prints each GPU NodePool's node class (root volume, AMI), disruption budgets and
// expiry: what keeps GPU nodes in business hours (the violations say what is wrong).
func writeGPUPools(w io.Writer, pools []check.GPUPool, md bool) {
	if len(pools) == 0 {
		return
	}
	if md {
		fmt.Fprintln(w, "\n| GPU NodePool | node class | root volume | AMI | disruption budgets (UTC) | expireAfter |\n|---|---|---|---|---|---|")
	}
	for _, p := range pools {
		budgets := strings.Join(p.Budgets, "; ")
		if md {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s |\n", p.Pool, p.NodeClass, orNone(p.RootVolume), orNone(p.AMI), orNone(budgets), p.ExpireAfter)
		} else {
			fmt.Fprintf(w, "  GPU-POOL %s node-class=%s root=%s ami=%s budgets=%s expireAfter=%s\n", p.Pool, p.NodeClass, orNone(p.RootVolume), orNone(p.AMI), orNone(budgets), p.ExpireAfter)
		}
	}
}

// orNone is s, or "none" when empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
