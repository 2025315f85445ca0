package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/check"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/simulate"
)

func newCheckCommand() *cobra.Command {
	var repoDir, base, head, output string
	var simulateProd bool
	cmd := &cobra.Command{
		Use:   "check --base REV [--head REV] [-o text|markdown|json]",
		Short: "Check a change for production: rendered diff per env, admission policies, capacity invariants",
		Long: `check renders every env at --base and --head, prints what changes in the rendered cluster
state (prod first), evaluates the ValidatingAdmissionPolicies of policies/ offline with the API
server's own CEL machinery, and checks the capacity invariants (KV cache fits the GPU, GPU
workloads fit the GPU pool, startupProbe covers the cold start, every KEDA trigger can reach
maxReplicaCount and has a fallback) and the sync rules (no object needs one of a later Argo CD
sync wave; stateful objects carry sync-options Delete=false,Prune=false), the backup rule (CNPG
Clusters archive WAL through the Barman Cloud plugin to a rendered ObjectStore with a retention;
ScheduledBackups use method plugin) and the vLLM rules (the
grace period covers the preStop sleep and --shutdown-timeout; an init container waits for the
weights revision's marker a weights-sync Job writes; --dtype fits the card; warnings for an image
without a digest and logged probe paths) and the GPU node rules (a GPU NodePool's EC2NodeClass is
rendered, has a root volume of at least 100Gi and a pinned AMI; a budget of 0 nodes covers
business hours, a bounded one the rest, expireAfter Never; a GPU Deployment's PDB keeps its last
replica; GPU Jobs and CronJobs ignore DisruptionTarget in their podFailurePolicy and carry
karpenter.sh/do-not-disrupt) and the security rules (every namespace
enforces a Pod Security level at a pinned version and has a default-deny NetworkPolicy that
leaves DNS open; every container in a namespace enforcing restricted fits restricted) and the
monitoring rule (every PrometheusRule alert has a runbook_url naming a file of docs/runbooks/ at
--head). Each env's
section ends with what its namespaces enforce.

Exit codes: 0 pass, 1 violations, >1 error.`,
		Example: `  auditor check --base origin/main --head HEAD -o markdown > comment.md`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if base == "" {
				return &exitError{code: 2, err: fmt.Errorf("--base is required")}
			}
			repo, err := gitOpts.open(cmd.Context(), repoDir)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			res, err := check.Run(repo, base, head)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if simulateProd {
				if err := checkPlacement(repo, head, res); err != nil {
					return &exitError{code: 2, err: err}
				}
			}
			w := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return &exitError{code: 2, err: err}
				}
			case "markdown":
				writeCheck(w, res, true)
			case "text":
				writeCheck(w, res, false)
			default:
				return &exitError{code: 2, err: fmt.Errorf("unknown output format %q (want text, markdown or json)", output)}
			}
			if !res.Passed {
				return &exitError{code: 1, err: fmt.Errorf("violations")}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&repoDir, "repo", ".", "repository directory or URL")
	cmd.Flags().StringVar(&base, "base", "", "base revision (e.g. origin/main)")
	cmd.Flags().StringVar(&head, "head", "HEAD", "head revision")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, markdown or json")
	cmd.Flags().BoolVar(&simulateProd, "simulate", false, "also prove prod's placement with the real kube-scheduler (starts a local cluster; make tools)")
	return cmd
}

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
	h(2, fmt.Sprintf("auditor check: %s (%.12s → %.12s)", verdict, res.Base, res.Head))
	for _, e := range res.Envs {
		h(3, fmt.Sprintf("%s: %d objects changed, %d violations", e.Env, len(e.Changes), len(e.Violations)))
		for _, v := range e.Violations {
			if md {
				fmt.Fprintf(w, "- :x: **%s** `%s`: %s\n", v.Rule, v.Object, v.Message)
			} else {
				fmt.Fprintf(w, "  VIOLATION %s %s: %s\n", v.Rule, v.Object, v.Message)
			}
		}
		for _, v := range e.Warnings { // reported, not failing the check
			if md {
				fmt.Fprintf(w, "- :warning: **%s** `%s`: %s\n", v.Rule, v.Object, v.Message)
			} else {
				fmt.Fprintf(w, "  WARNING %s %s: %s\n", v.Rule, v.Object, v.Message)
			}
		}
		writeSecurity(w, e.Security, md)
		writeGPUPools(w, e.GPUPools, md)
		if md && len(e.Changes) > 0 {
			fmt.Fprintln(w, "\n<details><summary>rendered changes</summary>\n\n```diff")
		}
		for _, c := range e.Changes {
			obj := c.Kind + " " + c.Name
			if c.Namespace != "" {
				obj = c.Kind + " " + c.Namespace + "/" + c.Name
			}
			sign := map[string]string{"added": "+", "removed": "-", "changed": "~"}[c.Change]
			fmt.Fprintf(w, "%s %s (%s)\n", sign, obj, c.Change)
			for _, f := range c.Fields {
				fmt.Fprintf(w, "    %s: %s → %s\n", f.Path, short(f.From), short(f.To))
			}
		}
		if md && len(e.Changes) > 0 {
			fmt.Fprintln(w, "```\n</details>")
		}
		fmt.Fprintln(w)
	}
}

// writeSecurity prints what each namespace enforces: the Pod Security level, the default-deny
// NetworkPolicy and the one that keeps DNS open ("none" where missing; the violations say why).
func writeSecurity(w io.Writer, namespaces []check.NamespaceSecurity, md bool) {
	if len(namespaces) == 0 {
		return
	}
	none := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	if md {
		fmt.Fprintln(w, "\n| namespace | Pod Security (enforce) | default deny | DNS egress |\n|---|---|---|---|")
	}
	for _, n := range namespaces {
		if md {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", n.Namespace, none(n.PodSecurity), none(n.DefaultDeny), none(n.DNS))
		} else {
			fmt.Fprintf(w, "  SECURITY %s pod-security=%s default-deny=%s dns=%s\n", n.Namespace, none(n.PodSecurity), none(n.DefaultDeny), none(n.DNS))
		}
	}
}

// writeGPUPools prints each GPU NodePool's node class (root volume, AMI), disruption budgets and
// expiry: what keeps GPU nodes in business hours (the violations say what is wrong).
func writeGPUPools(w io.Writer, pools []check.GPUPool, md bool) {
	if len(pools) == 0 {
		return
	}
	dash := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	if md {
		fmt.Fprintln(w, "\n| GPU NodePool | node class | root volume | AMI | disruption budgets (UTC) | expireAfter |\n|---|---|---|---|---|---|")
	}
	for _, p := range pools {
		budgets := strings.Join(p.Budgets, "; ")
		if md {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s |\n", p.Pool, p.NodeClass, dash(p.RootVolume), dash(p.AMI), dash(budgets), p.ExpireAfter)
		} else {
			fmt.Fprintf(w, "  GPU-POOL %s node-class=%s root=%s ami=%s budgets=%s expireAfter=%s\n", p.Pool, p.NodeClass, dash(p.RootVolume), dash(p.AMI), dash(budgets), p.ExpireAfter)
		}
	}
}

// checkPlacement runs the prod placement simulation at head on a fresh local cluster and adds
// its violations to the result.
func checkPlacement(repo *gitrepo.Repo, head string, res *check.Result) error {
	snap, err := repo.Snapshot(head)
	if err != nil {
		return err
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return err
	}
	prod, err := src.Render("prod")
	if err != nil {
		return err
	}
	rep, err := simulateOn(context.Background(), kubeFlags{}, prod.Objects, simulate.Options{Env: "prod", RunCronJobs: true})
	if err != nil {
		return err
	}
	var vs []check.Violation
	for _, v := range rep.Violations {
		vs = append(vs, check.Violation{Rule: "placement-" + v.Rule, Object: v.Pod + " on " + v.Node, Message: v.Message})
	}
	res.AddPlacement("prod", vs)
	return nil
}
