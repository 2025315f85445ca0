package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/simulate"
	"github.com/llm-gitops/platform/internal/testcluster"
)

func newSimulateCommand() *cobra.Command {
	var src sourceFlags
	var kube kubeFlags
	var env, nodesFile, output string
	cmd := &cobra.Command{
		Use:   "simulate --env ENV [--nodes FILE] [-o text|json]",
		Short: "Prove placement with the real kube-scheduler on a model of the env's node pools",
		Long: `simulate starts a local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler;
built by make tools) — or uses --kubeconfig's, which must run the scheduler and controller-manager —
creates Nodes modelling the overlay's NodePools (labels, taints, allocatable cpu/memory/GPUs; counts
from --nodes or the NodePool limits), applies the rendered overlay, fires every CronJob once, and
reports where the scheduler put each pod: per pool, pending pods with the scheduler's reason, GPUs
used and free, and violations (a non-GPU pod on a GPU node, a GPU pod on a CPU node or the wrong card).

Exit codes: 0 no violations, 1 violations, >1 error.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := src.render(env)
			if err != nil {
				return err
			}
			opts := simulate.Options{Env: env, RunCronJobs: true}
			if nodesFile != "" {
				if opts.Groups, err = simulate.LoadNodes(nodesFile); err != nil {
					return &exitError{code: 2, err: err}
				}
			}
			rep, err := simulateOn(context.Background(), kube, res.Objects, opts)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				_ = enc.Encode(rep)
			} else {
				writeSimulation(cmd.OutOrStdout(), rep)
			}
			if len(rep.Violations) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("placement violations")}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&env, "env", "", "environment")
	cmd.Flags().StringVar(&nodesFile, "nodes", "", "nodes file (groups: pool, count, labels, taints, cpu, memory, gpus)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	src.add(cmd)
	kube.add(cmd)
	return cmd
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
	for _, p := range rep.Pending {
		fmt.Fprintf(w, "PENDING   %s: %s\n", p.Pod, p.Reason)
	}
	for _, p := range rep.Preempted {
		fmt.Fprintf(w, "PREEMPTED %s\n", p)
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "VIOLATION %s %s on %s: %s\n", v.Rule, v.Pod, v.Node, v.Message)
	}
	fmt.Fprintf(w, "%d violations\n", len(rep.Violations))
}

// simulateOn runs a placement simulation on kube's cluster when --kubeconfig names one, else on
// a fresh local four-process cluster (make tools), stopped afterwards.
func simulateOn(ctx context.Context, kube kubeFlags, objs []*unstructured.Unstructured, opts simulate.Options) (*simulate.Report, error) {
	var cfg *rest.Config
	if kube.kubeconfig != "" {
		c, err := kube.config()
		if err != nil {
			return nil, err
		}
		cfg = c
	} else {
		fmt.Fprintln(os.Stderr, "starting a local cluster with kube-scheduler and kube-controller-manager ...")
		c, err := testcluster.Start(ctx, testcluster.Options{Scheduler: true, ControllerManager: true})
		if err != nil {
			return nil, err
		}
		defer c.Stop()
		cfg = c.Config
		fmt.Fprintf(os.Stderr, "cluster started in %s\n", c.Started.Round(100*time.Millisecond))
	}
	start := time.Now()
	rep, err := simulate.Run(ctx, cfg, objs, opts)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "simulation took %s\n", time.Since(start).Round(100*time.Millisecond))
	return rep, nil
}
