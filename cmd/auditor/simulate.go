package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/simulate"
)

// simulateOptions are the flags of `auditor simulate`.
type simulateOptions struct {
	src            sourceFlags
	kube           kubeFlags
	env, nodesFile string
	output         string
	failNodes      []string
	failZones      []string
	atPeak         bool
	bins           clusterBinDirs
}

func newSimulateCommand() *cobra.Command {
	o := &simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate --env ENV [--nodes FILE] [--fail-node NAME]... [--fail-zone ZONE]... [-o text|json|yaml]",
		Short: "Prove placement with the real kube-scheduler on a model of the env's node pools",
		Long: `simulate starts a local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler;
built by make tools; from --kube-bin-dir and --etcd-bin-dir, else $KUBE_BIN_DIR and $ETCD_BIN_DIR,
else the checkout's bin/, the auditor's own directory or $XDG_CACHE_HOME/auditor) — or uses --kubeconfig's, which must run the scheduler and controller-manager —
creates Nodes modelling the overlay's NodePools (labels, taints, allocatable cpu/memory/GPUs; counts
from --nodes or the NodePool limits), applies the rendered overlay, fires every CronJob once, and
reports where the scheduler put each pod: per pool, pending pods with the scheduler's reason, GPUs
used and free, and violations (a non-GPU pod on a GPU node, a GPU pod on a CPU node or the wrong card).
With --fail-node, the named nodes then go, with their pods, and the placement settles again: the
report is of what is left, and says which pods were lost, where their replacements went, and what
is pending. --fail-zone takes every node of a zone: a NodePool's nodes take the zones of its
topology.kubernetes.io/zone requirement in turn, or zone-a, zone-b and zone-c when it has none.

Exit codes: 0 no violations, 1 violations, >1 error.`,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
	cmd.Flags().StringVar(&o.nodesFile, "nodes", "", "nodes file (groups: pool, count, labels, taints, cpu, memory, gpus)")
	cmd.Flags().StringArrayVar(&o.failNodes, "fail-node", nil, "a node to take away once the placement settled (repeatable; nodes are named <pool>[-<card>]-<n>, as the report lists them)")
	cmd.Flags().BoolVar(&o.atPeak, "at-peak", false, "run each Deployment with a measured traffic profile (clusters/<env>/profiles/) at its peak's replicas")
	cmd.Flags().StringArrayVar(&o.failZones, "fail-zone", nil, "take away every node of a zone (repeatable; a NodePool's zone requirement, else zone-a, zone-b, zone-c in turn)")
	addReportOutput(cmd, &o.output)
	o.src.add(cmd)
	o.kube.add(cmd)
	o.bins.add(cmd)
	return cmd
}

// Complete has nothing to fill.
func (o *simulateOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate has nothing to check before rendering: sourceFlags.render rejects a missing --env.
func (o *simulateOptions) Validate() error { return nil }

// Run renders the env, simulates its placement and prints it; exit code 1 on violations.
func (o *simulateOptions) Run(_ context.Context, w io.Writer) error {
	res, err := o.src.render(o.env)
	if err != nil {
		return err
	}
	opts := simulate.Options{Env: o.env, RunCronJobs: true, FailNodes: o.failNodes, FailZones: o.failZones}
	if o.atPeak {
		if opts.Scale, err = o.peaks(res.Objects); err != nil {
			return failed(err)
		}
	}
	if o.nodesFile != "" {
		if opts.Groups, err = simulate.LoadNodes(o.nodesFile); err != nil {
			return failed(err)
		}
	}
	o.bins.Repo = o.src.repo
	rep, err := simulateOn(context.Background(), o.kube, o.bins, res.Objects, opts)
	if err != nil {
		return failed(err)
	}
	err = writeReport(w, o.output, rep, func() error {
		writeSimulation(w, rep)
		return nil
	})
	if err != nil {
		return failed(err)
	}
	if len(rep.Violations) > 0 {
		return found("placement violations")
	}
	return nil
}

func writeSimulation(w io.Writer, rep *simulate.Report) {
	for _, p := range rep.Pools {
		fmt.Fprintf(w, "pool %-7s %2d nodes, %2d pods", p.Pool, p.Nodes, len(p.Pods))
		if p.GPUs > 0 {
			fmt.Fprintf(w, ", GPUs %d used / %d free", p.GPUsUsed, p.GPUs-p.GPUsUsed)
		}
		fmt.Fprintln(w)
		for _, pod := range p.Pods {
			fmt.Fprintf(w, "    %s\n", pod)
		}
	}
	if f := rep.Failure; f != nil {
		if len(f.Zones) > 0 {
			fmt.Fprintf(w, "FAILED    zone %s\n", strings.Join(f.Zones, ", "))
		}
		fmt.Fprintf(w, "FAILED    %s: %d pods lost\n", strings.Join(f.Nodes, ", "), len(f.Lost))
		for _, p := range f.Replaced {
			fmt.Fprintf(w, "REPLACED  %s on %s\n", p.Pod, p.Node)
		}
	}
	for _, p := range rep.Pending {
		fmt.Fprintf(w, "PENDING   %s: %s\n", p.Pod, p.Reason)
	}
	for _, s := range rep.Scaled {
		verdict := "fits"
		if s.Pending > 0 {
			verdict = "DOES NOT FIT"
		}
		fmt.Fprintf(w, "AT PEAK   %s %d replicas (%s): %d placed, %d pending: %s\n", s.Deployment, s.Replicas, s.Why, s.Placed, s.Pending, verdict)
	}
	for _, p := range rep.Preempted {
		fmt.Fprintf(w, "PREEMPTED %s\n", p)
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "VIOLATION %s %s on %s: %s\n", v.Rule, v.Pod, v.Node, v.Message)
	}
	fmt.Fprintf(w, "%d violations\n", len(rep.Violations))
}
