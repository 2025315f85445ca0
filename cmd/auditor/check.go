package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/simulate"
)

// checkOptions are the flags of `auditor check`.
type checkOptions struct {
	repo, base, head, output string
	simulate, verbose        bool
	cmd                      *cobra.Command
}

func newCheckCommand() *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check --base REV [--head REV] [-o text|markdown|json|yaml]",
		Short: "Check a change for production: rendered diff per env, admission policies, capacity invariants",
		Long: `check renders every env at --base and --head (the envs of the repository's .auditor.yaml, else
one per directory under overlays/), prints what changes in the rendered cluster state (prod
first), and runs the rules on what each env's Applications render.

On any repository it runs the generic rules: the ValidatingAdmissionPolicies of policies/,
evaluated offline with the API server's own CEL machinery; sync-wave order; the first sync; a
route a wave after its backends; Jobs that can sync again (Force=true,Replace=true); every
reference between objects resolves; a route's InferencePool is rendered in its namespace and a
split between pools weighs 100; the flows of base/network/flows.yaml (a pool's endpoint picker
among them); each Application renders. A rule is turned off in .auditor.yaml with a reason, printed beside what it silences; a
change that lowers that bar (a rule off, an env or the profile dropped) fails as layout-gate.

Where .auditor.yaml says profile: llm-platform (this repository does), this platform's rules run
too: the capacity invariants (KV cache fits the GPU, GPU
workloads fit the GPU pool, startupProbe covers the cold start, every KEDA trigger can reach
maxReplicaCount and has a fallback), the first-sync rules (every Secret, ConfigMap, claim,
ServiceAccount and PriorityClass a pod refers to is rendered, made by a known producer, or named
in annotation auditor.llm-gitops.io/external-refs; every PodDisruptionBudget allows an eviction at
its workloads' minimum scale; a weighted route split comes in a later sync wave than the
workloads it sends traffic to) and the sync rules (no object needs one of a later Argo CD
sync wave; stateful objects carry sync-options Delete=false,Prune=false), the backup rule (CNPG
Clusters archive WAL through the Barman Cloud plugin to a rendered ObjectStore with a retention;
ScheduledBackups use method plugin) and the vLLM rules (the
grace period covers the preStop sleep and --shutdown-timeout; an init container waits for the
weights revision's marker a weights-sync Job writes; --dtype fits the card; a warning for logged probe
paths; every InferencePool selects vLLM pods no other pool selects, on the port vLLM serves on,
and names a rendered endpoint picker its RBAC lets start) and the GPU node rules (a GPU NodePool's EC2NodeClass is
rendered, has a root volume of at least 100Gi and a pinned AMI; a budget of 0 nodes covers
business hours, a bounded one the rest, expireAfter Never; a GPU Deployment's PDB never lets
several replicas all go at once; GPU Jobs and CronJobs ignore DisruptionTarget in their podFailurePolicy and carry
karpenter.sh/do-not-disrupt; the GPU stack of clusters/gpu-stack.yaml: the AMI's driver runs the
image's CUDA, each part is known and as the env states it, prod takes a triple staging runs or
ran), the spread of every replicated CPU workload over zones and nodes,
and the security rules (every namespace
enforces a Pod Security level at a pinned version and has a default-deny NetworkPolicy that
leaves DNS open; every container in a namespace enforcing restricted fits restricted; every flow
of base/network/flows.yaml, monitor scrape, route backend and pod DNS lookup passes the
NetworkPolicies) and the
monitoring rule (every PrometheusRule alert has a runbook_url naming a file of docs/runbooks/ at
--head) and the site rule (overlays/<env>/site/site.yaml sets every site value, well formed;
once it is no longer the template's, staging and prod deploy no example.com name: see auditor
site). The report ends with each GPU stack triple, once, and the env sections that run it.

A pinned env (apps/<env>/release.yaml names a commit) is judged twice: at its pin, what Argo CD
runs today, and at its next promotion, the head's overlay as auditor promote would move the pin.
A violation the change brings to the next promotion fails it; one the next promotion already had
at --base is listed as inherited (auditor promote refuses it).

Without --head, a directory's work tree is checked as git diff HEAD sees it: every tracked file
as it is on disk, committed or not (untracked files are not read: git add them). A URL or a bare
repository is checked at HEAD. stderr says which tree was read.

Text and markdown list the violations, the warnings on what the change touches (an object it
changes, a file it edits), and, once each, the warnings at risk on what it leaves alone (an
Application check cannot render, example names staging or prod would deploy); the other
warnings and the inherited violations are counted, one line each (in markdown, a folded list).
Text wraps to the terminal, or to 100 columns. --verbose lists everything, with what each namespace enforces, the GPU pools and
each vLLM Deployment's KV cache.

Exit codes: 0 pass, 1 violations, >1 error.`,
		Example: `  auditor check --base HEAD~1                                   # the work tree (pre-commit)
  auditor check --base origin/main --head HEAD -o markdown > comment.md`,
		RunE: runE(o),
	}
	addRepoFlag(cmd, &o.repo, "repository directory or URL")
	cmd.Flags().StringVar(&o.base, "base", "", "base revision (e.g. origin/main)")
	cmd.Flags().StringVar(&o.head, "head", "", "head revision (default: the work tree of a directory, HEAD of a URL)")
	addOutputFlag(cmd, &o.output, "markdown: a pull request comment", "text", "markdown", "json", "yaml")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "print the full inventory: every warning and inherited violation, namespaces, GPU pools, KV cache")
	cmd.Flags().BoolVar(&o.simulate, "simulate", false, "also prove prod's placement with the real kube-scheduler (starts a local cluster; make tools)")
	return cmd
}

// Complete has nothing to fill.
func (o *checkOptions) Complete(cmd *cobra.Command, _ []string) error { o.cmd = cmd; return nil }

// Validate rejects a missing --base.
func (o *checkOptions) Validate() error {
	if o.base == "" {
		return usageErr("--base is required")
	}
	return nil
}

// Run checks the change and prints the result; exit code 1 on violations.
func (o *checkOptions) Run(ctx context.Context, w io.Writer) error {
	repo, err := gitOpts.open(ctx, o.repo)
	if err != nil {
		return failed(err)
	}
	head, err := o.headTree(repo)
	if err != nil {
		return failed(err)
	}
	fmt.Fprintf(o.cmd.ErrOrStderr(), "auditor: checking %s; base %s\n", treeName(o.repo, o.head, head), o.base)
	stop := startProgress(o.cmd, "rendering and checking every env at base and head")
	res, checkErr := check.RunTree(repo, o.base, head)
	stop()
	if res == nil {
		return failed(checkErr)
	}
	if o.simulate && checkErr == nil {
		stop := startProgress(o.cmd, "proving prod's placement with the real kube-scheduler")
		err := checkPlacement(head, res)
		stop()
		if err != nil {
			return failed(err)
		}
	}
	err = writeReport(w, o.output, res, func() error {
		v := checkView{md: o.output == "markdown", verbose: o.verbose}
		if !v.md {
			v.width = outputWidth(w)
		}
		writeCheck(w, res, v)
		return nil
	})
	if err != nil {
		return failed(err)
	}
	if checkErr != nil { // the envs that could be checked are reported above
		return failed(checkErr)
	}
	if !res.Passed {
		return found("violations")
	}
	return nil
}

// headTree is the tree --head names: the commit, or, without --head, the work tree of a
// directory (its HEAD's tree when nothing differs) and HEAD of a URL or a bare repository.
func (o *checkOptions) headTree(repo *gitrepo.Repo) (*gitrepo.Snapshot, error) {
	if o.head == "" {
		wt, err := repo.WorkTree()
		switch {
		case errors.Is(err, gitrepo.ErrNoWorkTree):
		case err != nil: // an index go-git cannot read (a split index, say): said, and HEAD read
			fmt.Fprintf(o.cmd.ErrOrStderr(), "auditor: cannot read the work tree (%v): checking HEAD; --head names a commit\n", err)
		case wt.Dirty():
			return wt, nil
		}
	}
	return repo.Snapshot(o.head)
}

// checkPlacement runs the prod placement simulation at head on a fresh local cluster and adds
// its violations to the result.
func checkPlacement(snap *gitrepo.Snapshot, res *check.Result) error {
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return err
	}
	prod, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	if err != nil {
		return err
	}
	rep, err := simulateOn(context.Background(), kubeFlags{}, clusterBinDirs{}, prod.Objects, simulate.Options{Env: "prod", RunCronJobs: true})
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
