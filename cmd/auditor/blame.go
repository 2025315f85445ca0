package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// blameOptions are the flags and argument of `auditor blame`.
type blameOptions struct {
	arg          string    // KIND/NAME
	ref          blame.Ref // arg, parsed
	src          sourceFlags
	kube         kubeFlags
	env          string
	namespace    string
	output       string
	appNamespace string
	applier      string
	auditLog     string
	maxCommits   int
	gitOnly      bool
	timeout      time.Duration
}

func newBlameCommand() *cobra.Command {
	o := &blameOptions{}
	cmd := &cobra.Command{
		Use:   "blame KIND/NAME --env ENV [-n NAMESPACE] [--repo DIR|URL] [--revision REV] [--audit-log PATH] [-o text|json|yaml]",
		Short: "git blame for a live object: the commit behind each field Git declares, and who wrote the live object",
		Long: `blame walks the env's first-parent history back from the revision Argo CD synced (the branch
head without one; --revision to choose), rendering the env at each commit, and names for every
field Git declares for the object the commit that last changed its rendered value (sha, author,
date, subject). The env is read as the repository's layout says (.auditor.yaml, else
overlays/<env>): an object of an env without an overlay of its own, or one its overlay does not
declare, is looked for in the Applications the env's root syncs (and those they declare), and
the path of the Application that renders it is walked instead; a chart of the repository is
rendered with the Application's Helm values. Beside it, from the cluster: the object's drift
(live value, field manager, and with --audit-log the person), and the writes to the live object
the audit log holds, newest first, with old -> new for the fields each changed. --git-only leaves the cluster out. Only
commits are read, never the work tree.

Exit codes: 0 done, >1 error.`,
		Example: `  auditor blame deployment/vllm-qwen --env prod -n llm-inference --audit-log /var/log/kubernetes/audit.log
  auditor blame deployment/vllm-qwen --env prod --git-only --max-commits 50 -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeObjects,
		RunE:              runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace of the object (needed when the name is not unique in the env)")
	_ = cmd.RegisterFlagCompletionFunc("namespace", completeNamespaces)
	addReportOutput(cmd, &o.output)
	cmd.Flags().IntVar(&o.maxCommits, "max-commits", blame.DefaultMaxCommits, "walk at most this many first-parent commits back")
	cmd.Flags().BoolVar(&o.gitOnly, "git-only", false, "Git history only: do not read the cluster (start from --revision or the branch head)")
	cmd.Flags().StringVar(&o.auditLog, "audit-log", "", "the API server's audit log (JSON lines, --audit-log-path): the writes to the object and the people behind them")
	addArgoCDNamespaceFlag(cmd, &o.appNamespace, "namespace of Argo CD and its Applications")
	cmd.Flags().StringVar(&o.applier, "applier", "argocd-controller", "field manager of the GitOps sync")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	o.src.add(cmd)
	// blame reads commits only: the shared usage's work-tree default is not blame's.
	cmd.Flags().Lookup("revision").Usage = "Git revision to walk back from (default: the revision Argo CD synced; the branch head with --git-only)"
	o.kube.add(cmd)
	return cmd
}

// Complete takes the object from the arguments.
func (o *blameOptions) Complete(_ *cobra.Command, args []string) error {
	o.arg = args[0]
	return nil
}

// Validate rejects a missing --env and a malformed object.
func (o *blameOptions) Validate() error {
	if o.env == "" {
		return usageErr("--env is required")
	}
	ref, err := blame.ParseRef(o.arg, o.namespace)
	if err != nil {
		return failed(err)
	}
	o.ref = ref
	return nil
}

// Run blames the object and prints it.
func (o *blameOptions) Run(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	repo, err := gitOpts.open(ctx, o.src.repo)
	if err != nil {
		return failed(err)
	}
	// The env as the repository's layout names it, and its Applications as the layout finds them.
	l, err := repoLayout(repo, o.src.revision)
	if err != nil {
		return err
	}
	if err := checkEnvs(l.Names(), o.env); err != nil {
		return err
	}
	stop := startProgress(o.src.cmd, "walking "+o.env+"'s history for "+o.arg)
	defer stop()
	req := blame.Request{Env: o.env, Object: o.ref, Revision: o.src.revision, MaxCommits: o.maxCommits}
	renders := render.NewCache("", 4) // in memory: a walk adds a revision to an entry at every commit
	renders.Shared = true
	var b *blame.Blame
	cluster := "the cluster was not read (--git-only)"
	if o.gitOnly {
		if b, err = blame.Git(ctx, repo, req, blame.Options{Renders: renders}); err != nil {
			return failed(err)
		}
	} else {
		cfg, err := o.kube.config()
		if err != nil {
			return failed(err)
		}
		cache, err := live.New(ctx, cfg)
		if err != nil {
			return failed(err)
		}
		people, err := loadAuditLog(ctx, o.auditLog)
		if err != nil {
			return failed(err)
		}
		c := audit.Config{Repo: repo, Live: cache, AppNamespace: o.appNamespace, People: people,
			Renders: renders, // the audit's render of the synced revision is the walk's first
			Drift:   func(opts *drift.Options) { opts.Applier = o.applier }}
		audit.UseLayout(&c, l) // the env's root, its manifest, projects and selector, as diff finds them
		if e, ok := l.Env(o.env); ok && o.src.cmd != nil && !argocdNamespaceSet(o.src.cmd) {
			c.AppNamespace = e.Namespace
		}
		a := audit.New(c)
		// The drift, and the revision Argo CD synced, as `auditor diff` finds them.
		rep, err := a.Run(ctx, audit.Request{Env: o.env, Revision: o.src.revision})
		if err != nil {
			return failed(err)
		}
		req.Revision = rep.Revision
		req.Applications = auditedApplications(rep, o.ref)
		if b, err = blame.Git(ctx, repo, req, blame.Options{Renders: renders, Types: blame.ClusterTypes(ctx, cache)}); err != nil {
			return failed(err)
		}
		b.AddLive(cache, a.People, rep)
		cluster = "read the cluster at " + cfg.Host
		if o.kube.context != "" {
			cluster += " (context " + o.kube.context + ")"
		}
	}
	stop()
	if o.src.cmd != nil {
		fmt.Fprintln(o.src.cmd.ErrOrStderr(), "auditor:", o.describe(b, cluster))
	}
	return writeBlame(w, b, o.output)
}
