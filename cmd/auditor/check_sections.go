package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

// writeNext prints a pinned env at its next promotion: what the promotion would change, what of
// that the checked change brings, and the violations it introduces and inherits.
// t is what the change brings to it; seen the at-risk warnings listed already.
func (v checkView) writeNext(w io.Writer, h func(int, string), e check.EnvResult, head string, t touched, seen listed) {
	md, env, pin, n := v.md, e.Env, e.Revision, e.Next
	h(3, fmt.Sprintf("%s at next promotion (%s → %s): %s change (%d by this change), %s",
		env, gitrepo.Short(pin), head, count(len(n.Changes), "object"), len(n.Introduced), count(len(n.Violations), "violation")))
	if len(n.Violations) > 0 {
		fmt.Fprintf(w, "%s runs its pin %s. This change reaches %s when the head is promoted, and there it breaks:\n", env, gitrepo.Short(pin), env)
		if md {
			fmt.Fprintln(w)
		}
	}
	v.writeFindings(w, "VIOLATION", ":x:", n.Violations)
	v.writeInherited(w, n.Inherited, n.ForkError, "broken before this change; auditor promote refuses it")
	v.writeWarnings(w, env, n.Warnings, t, seen)
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

// failing names each section that fails the check, with its rules.
func failing(res *check.Result) []string {
	var out []string
	add := func(what string, vs []check.Violation) {
		if len(vs) == 0 {
			return
		}
		var rules []string
		for _, v := range vs {
			if !slices.Contains(rules, v.Rule) {
				rules = append(rules, v.Rule)
			}
		}
		out = append(out, fmt.Sprintf("%s (%s)", what, strings.Join(rules, ", ")))
	}
	for _, e := range res.Envs {
		what := e.Env
		if e.Next != nil {
			what += " at its pin"
		}
		add(what, e.Violations)
		if e.Next != nil {
			add(e.Env+" at next promotion", e.Next.Violations)
		}
	}
	return out
}

// count is "1 violation", "2 violations".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// writeInherited prints the violations the env had before the change (they do not fail it), each
// with why, or why none could be known; unless verbose, only how many of which rules.
func (v checkView) writeInherited(w io.Writer, vs []check.Violation, forkErr, why string) {
	if forkErr != "" {
		v.writeFindings(w, "NOTE", ":information_source:", []check.Violation{{Rule: "inherited", Object: "fork point", Message: forkErr}})
	}
	if !v.verbose {
		v.writeSummary(w, "inherited violation", why, vs)
		return
	}
	out := make([]check.Violation, len(vs))
	for i, f := range vs {
		f.Message += " (" + why + ")"
		out[i] = f
	}
	v.writeFindings(w, "INHERITED", ":warning:", out)
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

// gpuStacks are the GPU stack triples of a check's sections, each with the sections that run it.
type gpuStacks struct {
	triples []gpustack.Triple
	where   [][]string
}

// add records section env+what's triple t (nil: none).
func (g *gpuStacks) add(env, what string, t *gpustack.Triple) {
	if t == nil {
		return
	}
	i := slices.Index(g.triples, *t)
	if i < 0 {
		g.triples, g.where = append(g.triples, *t), append(g.where, nil)
		i = len(g.triples) - 1
	}
	g.where[i] = append(g.where[i], env+what)
}

// write prints each triple once, after the envs, with the sections that run it: the AMI and its
// driver, the inference image and its CUDA, the GPU Operator (clusters/gpu-stack.yaml; the
// violations say what is wrong).
func (g *gpuStacks) write(w io.Writer, v checkView) {
	for i, t := range g.triples {
		where := strings.Join(g.where[i], ", ")
		if v.md {
			fmt.Fprintf(w, "GPU stack of %s: %s\n\n", where, t)
			continue
		}
		fmt.Fprint(w, wrap(fmt.Sprintf("GPU-STACK of %s: ami=%s driver=%s image=%s cuda=%s gpu-operator=%s",
			where, orNone(t.AMI), orNone(t.Driver), orNone(t.Image), orNone(t.CUDA), orNone(t.GPUOperator)), v.width, "  "))
	}
}

// orNone is s, or "none" when empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// treeName says which tree a command read, for stderr: a work tree with its uncommitted
// changes, or a commit.
func treeName(location, rev string, snap *gitrepo.Snapshot) string {
	if snap.Revision == "" {
		staged := ""
		if len(snap.Staged) > 0 {
			staged = fmt.Sprintf("; staged content that is not on disk is not read: %s", strings.Join(snap.Staged, ", "))
		}
		return fmt.Sprintf("the work tree of %s (%s differ from HEAD %s; untracked files are not read%s)",
			snap.WorkTree, count(len(snap.Changed), "file"), gitrepo.Short(snap.Parent), staged)
	}
	if rev == "" && !gitrepo.IsURL(location) {
		return readAt(location, "HEAD", snap.Revision) + ", whose work tree is clean"
	}
	return readAt(location, rev, snap.Revision)
}
