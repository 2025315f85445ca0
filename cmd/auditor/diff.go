package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// diffOptions are the flags of `auditor diff`.
type diffOptions struct {
	src          sourceFlags
	kube         kubeFlags
	env, output  string
	app, root    string
	selector     string
	projects     []string
	all          bool
	appNamespace string
	applier      string
	cacheDir     string
	auditLog     string
	timings      bool
	timeout      time.Duration
	repoServer   reposerver.Config
	daemon       daemonFlags
}

func newDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff (--env ENV | --all) [--app NAME] [--repo DIR|URL] [--revision REV] [--kubeconfig F] [--context C] [-o text|json|yaml|patch]",
		Short: "Compare what Git says with what runs; name every drifted field and who changed it",
		Long: `diff renders the revision Argo CD synced (the Application's status.sync.revision; the branch
head without one), compares it with the live objects field by field, and names the field manager,
operation, subresource and time of every drifted field. Git ahead of the synced revision is
reported as a pending sync, not as drift.

-o patch prints instead the change that adopts the live state into Git: one strategic-merge
patch file per drifted object, listed in the kustomization its Application renders
(overlays/<env>/ for the env's own), as a diff that git apply accepts on the audited revision.
What it cannot adopt (Secrets, missing and extra objects, list items addressed by position, the
objects of a Helm chart or a plain directory) is named on stderr.

With the env's root Application (root-<env>) in the cluster, every Application under it is
audited, the Applications themselves included; --app NAME reports one of them. --all audits every
env of the repository (-o json: a list of reports).

--selector and --project add the cluster's Applications they pick (in --argocd-namespace) to the
env's group. Applications an ApplicationSet of the group generated are always added. Git holds
no manifest of such an Application: its objects are compared with its live source's render.

Exit codes: 0 in sync, 1 drift, >1 error.`,
		Example: `  auditor diff --env prod
  auditor diff --all -o json
  auditor diff --env prod --app llm-policies
  auditor diff --env prod --repo file:///srv/git/platform.git -o json
  auditor diff --env prod -o patch | git apply   # make Git say what runs
  auditor diff --env prod --daemon http://auditor.auditor:8080   # the people the daemon names`,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
	addOutputFlag(cmd, &o.output, "patch: a diff adopting the live state into the kustomization of each object's Application, for git apply", "text", "json", "yaml", "patch")
	cmd.Flags().StringVar(&o.app, "app", "", "report only this Application of the env's group")
	_ = cmd.RegisterFlagCompletionFunc("app", completeApps)
	cmd.Flags().BoolVar(&o.all, "all", false, "audit every env of the repository (its .auditor.yaml's, else the directories under overlays/)")
	cmd.Flags().BoolVar(&o.timings, "timings", false, "print how long each stage took (git, render, live, schema, compare, argocd) to stderr")
	o.daemon.add(cmd)
	o.addAuditFlags(cmd)
	return cmd
}

// addAuditFlags adds the flags that say what to audit and how: the repository and revision, the
// cluster, the env's Applications, the renderer, the audit log, the cache (diff's, and the
// commands that audit as diff does).
func (o *diffOptions) addAuditFlags(cmd *cobra.Command) {
	addArgoCDNamespaceFlag(cmd, &o.appNamespace, "namespace of Argo CD and its Applications")
	cmd.Flags().StringVar(&o.selector, "selector", "", "also audit the Applications whose labels match this selector (kubectl's syntax)")
	cmd.Flags().StringSliceVar(&o.projects, "project", nil, "also audit the Applications of this AppProject (repeatable; with --selector, both must match)")
	cmd.Flags().StringVar(&o.root, "root", "", "the env's root Application (app-of-apps; default: .auditor.yaml's, else root-<env>): with it in the cluster, every Application under it is audited; the env need not be listed anywhere")
	cmd.Flags().StringVar(&o.applier, "applier", "argocd-controller", "field manager of the GitOps sync")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	cmd.Flags().StringVar(&o.repoServer.Address, "repo-server", "", "render each Application by Argo CD's repo-server at this host:port, as its controller asks it (default: render in process)")
	cmd.Flags().BoolVar(&o.repoServer.Plaintext, "repo-server-plaintext", false, "talk to the repo-server without TLS")
	cmd.Flags().BoolVar(&o.repoServer.StrictTLS, "repo-server-strict-tls", false, "verify the repo-server's certificate (against --repo-server-ca)")
	cmd.Flags().StringVar(&o.repoServer.CAFile, "repo-server-ca", "", "CA certificate of the repo-server (ca.crt of the argocd-repo-server-tls Secret)")
	cmd.Flags().StringVar(&o.auditLog, "audit-log", "", "the API server's audit log (JSON lines, --audit-log-path): name the person behind each drifted field")
	cmd.Flags().StringVar(&o.cacheDir, "cache-dir", defaultCacheDir(), `directory caching renders (by the content they read) and Argo CD's in-sync verdicts (by the objects compared); "off": none`)
	o.src.add(cmd)
	o.kube.add(cmd)
}

// Complete has nothing to fill.
func (o *diffOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate rejects a missing --env, --env with --all and -o patch with --all.
func (o *diffOptions) Validate() error {
	switch {
	case o.env == "" && !o.all:
		return usageErr("--env or --all is required")
	case o.env != "" && o.all:
		return usageErr("--env and --all exclude each other")
	case o.all && o.output == "patch":
		return usageErr("-o patch adopts one env: use --env")
	}
	if _, err := labels.Parse(o.selector); err != nil {
		return usageErr("--selector: %v", err)
	}
	return nil
}

// Run audits the env and prints the drift; exit code 1 when there is some.
func (o *diffOptions) Run(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var stages []string
	var timing func(string, time.Duration)
	if o.timings {
		timing = func(stage string, took time.Duration) {
			stages = append(stages, fmt.Sprintf("%s=%.3fs", stage, took.Seconds()))
		}
		defer func() { fmt.Fprintln(os.Stderr, "timings:", strings.Join(stages, " ")) }()
	}
	repo, a, err := o.auditor(ctx, timing)
	if err != nil {
		return failed(err)
	}
	if o.all {
		return o.runAll(ctx, w, a)
	}
	stop := startProgress(o.src.cmd, "rendering "+o.env+" and reading the cluster")
	rep, err := a.Run(ctx, audit.Request{Env: o.env, Revision: o.src.revision})
	stop()
	if err != nil {
		return failed(err)
	}
	o.daemon.takePeople(ctx, rep, os.Stderr)
	if o.app != "" {
		if rep, err = onlyApplication(rep, o.app); err != nil {
			return err
		}
	}
	switch o.output {
	case "json", "yaml":
		if err := writeReport(w, o.output, rep, nil); err != nil {
			return failed(err)
		}
	case "patch":
		if err := writeAdoptPatch(w, os.Stderr, repo, rep); err != nil {
			return failed(err)
		}
	default:
		writeText(w, rep, time.Now())
	}
	if !rep.InSync {
		return found("drift")
	}
	return nil
}
