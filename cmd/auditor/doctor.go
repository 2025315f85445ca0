package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/doctor"
)

// doctorOptions are the flags of `auditor doctor`.
type doctorOptions struct {
	src          sourceFlags
	kube         kubeFlags
	env, output  string
	argocdNS, sa string
	objs         []*unstructured.Unstructured
}

func newDoctorCommand() *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor --env ENV [--repo DIR|URL] [--revision REV] [--kubeconfig FILE] [-o text|json|yaml]",
		Short: "Check a cluster has what an env's first sync needs: APIs, issuers, stores, classes, health checks",
		Long: `doctor renders the env (its overlay and its Applications, apps/<env>) and checks the cluster
against it, one line each with the fix:
  api      every API group and kind the render uses is served at the version it uses (the CRDs
           of KEDA, Karpenter, CloudNativePG, cert-manager, External Secrets, the Prometheus
           Operator, the Gateway API, Argo CD);
  object   each cluster-scoped object the render names and does not create exists: the
           certificates' ClusterIssuer, the ExternalSecrets' ClusterSecretStore, the Gateway's
           GatewayClass (each Ready or Accepted), StorageClasses (a default one for claims
           naming none) and PriorityClasses; a Prometheus selecting every monitor and rule;
  argocd   how Argo CD assesses the health of each custom kind (informational: the sync
           waves wait on it);
  auditor  once synced, the auditor's ServiceAccount may list and watch what it audits (the
           rendered kinds, and those it watches for hand-made objects in its namespaces),
           read argocd-cm and hold its Leases.
Operators' pods are not checked: their APIs and objects are.

Exit codes: 0 ready, 1 something is missing, 2 bad input, or a check the cluster did not
answer (marked ?).`,
		Example: `  auditor doctor --env prod
  auditor doctor --env staging --context staging -o json`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
	addReportOutput(cmd, &o.output)
	addArgoCDNamespaceFlag(cmd, &o.argocdNS, "namespace of Argo CD and its argocd-cm")
	cmd.Flags().StringVar(&o.sa, "auditor", "llm-system/auditor", "the auditor's ServiceAccount, namespace/name")
	o.src.add(cmd)
	o.kube.add(cmd)
	return cmd
}

// Complete renders the env and its Applications.
func (o *doctorOptions) Complete(*cobra.Command, []string) error {
	if o.env == "" {
		return usageErr("--env is required")
	}
	res, err := o.src.render(o.env)
	if err != nil {
		return err
	}
	o.objs = slices.Clip(res.Objects)
	src, err := o.src.open()
	if err != nil {
		return failed(err)
	}
	apps, err := render.Apps(context.Background(), render.Engine{}, src, o.env)
	if err != nil {
		return failed(err)
	}
	if apps != nil {
		o.objs = append(o.objs, apps.Objects...)
	}
	return nil
}

// Validate has nothing left to check.
func (o *doctorOptions) Validate() error { return nil }

// Run checks the cluster and prints one line per check.
func (o *doctorOptions) Run(ctx context.Context, w io.Writer) error {
	cfg, err := o.kube.config()
	if err != nil {
		return failed(err)
	}
	stop := startProgress(o.src.cmd, "checking "+cfg.Host)
	rep, err := doctor.Run(ctx, cfg, o.env, o.objs, doctor.Options{ArgoCDNamespace: o.argocdNS, Auditor: o.sa})
	stop()
	if err != nil {
		return failed(err)
	}
	switch o.output {
	case "json":
		err = writeJSON(w, rep)
	case "yaml":
		err = writeYAML(w, rep)
	default:
		err = writeDoctor(w, rep)
	}
	if err != nil {
		return failed(err)
	}
	if rep.Errors > 0 {
		return failed(fmt.Errorf("%d checks could not be made: no verdict", rep.Errors))
	}
	if !rep.OK {
		return found("something the first sync needs is missing")
	}
	return nil
}

func writeDoctor(w io.Writer, rep *doctor.Report) error {
	if _, err := fmt.Fprintf(w, "auditor doctor: %s against %s (%s)\n", rep.Env, rep.Server, rep.Version); err != nil {
		return err
	}
	for _, c := range rep.Checks {
		mark := "✔"
		switch {
		case c.Skipped:
			mark = "-"
		case c.Error:
			mark = "?"
		case !c.OK:
			mark = "✘"
		}
		fmt.Fprintf(w, "%s %-8s %s: %s\n", mark, c.Area, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "    fix: %s\n", c.Fix)
		}
	}
	if rep.OK {
		_, err := fmt.Fprintln(w, "ready for the first sync")
		return err
	}
	return nil
}
