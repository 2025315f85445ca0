package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/audit"
	"github.com/llm-gitops/platform/internal/auditlog"
	"github.com/llm-gitops/platform/internal/blame"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
)

type blameOptions struct {
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
		Use:   "blame KIND/NAME --env ENV [-n NAMESPACE] [--repo DIR|URL] [--revision REV] [--audit-log PATH] [-o text|json]",
		Short: "git blame for a live object: the commit behind each field Git declares, and who wrote the live object",
		Long: `blame walks the env's first-parent history back from the revision Argo CD synced (the branch
head without one; --revision to choose), rendering the env at each commit, and names for every
field Git declares for the object the commit that last changed its rendered value (sha, author,
date, subject). Beside it, from the cluster: the object's drift (live value, field manager, and
with --audit-log the person), and the writes to the live object the audit log holds, newest
first, with old -> new for the fields each changed. --git-only leaves the cluster out. Only
commits are read, never the work tree.

Exit codes: 0 done, >1 error.`,
		Example: `  auditor blame deployment/vllm-qwen --env prod -n llm-inference --audit-log /var/log/kubernetes/audit.log
  auditor blame deployment/vllm-qwen --env prod --git-only --max-commits 50 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), cmd.OutOrStdout(), args[0]) },
	}
	cmd.Flags().StringVar(&o.env, "env", "", "environment (a directory under overlays/)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace of the object (needed when the name is not unique in the env)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().IntVar(&o.maxCommits, "max-commits", blame.DefaultMaxCommits, "walk at most this many first-parent commits back")
	cmd.Flags().BoolVar(&o.gitOnly, "git-only", false, "Git history only: do not read the cluster (start from --revision or the branch head)")
	cmd.Flags().StringVar(&o.auditLog, "audit-log", "", "the API server's audit log (JSON lines, --audit-log-path): the writes to the object and the people behind them")
	cmd.Flags().StringVar(&o.appNamespace, "app-namespace", "argocd", "namespace of the Argo CD Applications")
	cmd.Flags().StringVar(&o.applier, "applier", "argocd-controller", "field manager of the GitOps sync")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	o.src.add(cmd)
	o.kube.add(cmd)
	return cmd
}

func (o *blameOptions) run(ctx context.Context, w io.Writer, arg string) error {
	if o.env == "" {
		return &exitError{code: 2, err: fmt.Errorf("--env is required")}
	}
	if o.output != "text" && o.output != "json" {
		return &exitError{code: 2, err: fmt.Errorf("unknown output format %q (want text or json)", o.output)}
	}
	ref, err := blame.ParseRef(arg, o.namespace)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	repo, err := gitOpts.open(ctx, o.src.repo)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	req := blame.Request{Env: o.env, Object: ref, Revision: o.src.revision, MaxCommits: o.maxCommits}
	renders := render.NewCache("", 4) // in memory: a walk adds a revision to an entry at every commit
	renders.Shared = true
	var b *blame.Blame
	if o.gitOnly {
		if b, err = blame.Git(ctx, repo, req, blame.Options{Renders: renders}); err != nil {
			return &exitError{code: 2, err: err}
		}
	} else {
		cfg, err := o.kube.config()
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		cache, err := live.New(ctx, cfg)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		a := audit.New(repo, cache)
		a.AppNamespace, a.Options.Applier = o.appNamespace, o.applier
		a.Renders = renders // the audit's render of the synced revision is the walk's first
		if o.auditLog != "" {
			a.People = auditlog.NewStore(0)
			if err := (auditlog.File{Path: o.auditLog}).Load(ctx, a.People); err != nil {
				return &exitError{code: 2, err: err}
			}
		}
		// The drift, and the revision Argo CD synced, as `auditor diff` finds them.
		rep, err := a.Run(ctx, audit.Request{Env: o.env, Revision: o.src.revision})
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		req.Revision = rep.Revision
		if b, err = blame.Git(ctx, repo, req, blame.Options{Renders: renders, Types: blame.ClusterTypes(ctx, cache)}); err != nil {
			return &exitError{code: 2, err: err}
		}
		b.AddLive(cache, a.People, rep)
	}
	return writeBlame(w, b, o.output)
}

func writeBlame(w io.Writer, b *blame.Blame, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(b); err != nil {
			return &exitError{code: 2, err: err}
		}
		return nil
	}
	if err := blame.WriteText(w, b); err != nil {
		return &exitError{code: 2, err: err}
	}
	return nil
}
