package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/mcp"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/version"
)

// mcpOptions are the flags of `auditor mcp`: diff's, and the tools served.
type mcpOptions struct {
	diff  diffOptions
	tools []string
	cmd   *cobra.Command
}

func newMCPCommand() *cobra.Command {
	o := &mcpOptions{}
	cmd := &cobra.Command{
		Use:   "mcp [--repo DIR|URL] [--kubeconfig F] [--context C] [--tools NAME,...]",
		Short: "Serve the auditor's answers to an assistant: a read-only Model Context Protocol server on stdio",
		Long: `mcp speaks the Model Context Protocol on stdin and stdout, for an assistant that starts it. Its
tools are read-only: drift, explain, blame (the cluster audited as auditor diff audits it, on
each call), check, ledger_at, schedule_plan and capacity (Git alone). episodes needs the
daemon's history: connect to auditor serve's /mcp instead. Without a cluster (no kubeconfig),
the cluster tools answer that none is configured. Secret values never leave.

It takes diff's flags. See docs/mcp.md for the assistants' configuration.`,
		Example: `  auditor mcp --repo . --context prod
  npx @modelcontextprotocol/inspector --cli auditor mcp --repo . --method tools/list`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.diff.addAuditFlags(cmd)
	cmd.Flags().StringSliceVar(&o.tools, "tools", nil, "serve only these tools (default all: "+strings.Join(mcp.Tools, ", ")+")")
	return cmd
}

// Complete audits every env, as diff --all does: a tool names the env.
func (o *mcpOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.cmd, o.diff.all = cmd, true
	return nil
}

// Validate has nothing to check: an unknown tool is New's error.
func (o *mcpOptions) Validate() error { return nil }

// Run serves the tools on stdin and stdout until the client goes away.
func (o *mcpOptions) Run(ctx context.Context, w io.Writer) error {
	opts := mcp.Options{Tools: o.tools, Version: version.Get().String(), Repo: o.repo()}
	if _, err := o.diff.kube.config(); err != nil {
		fmt.Fprintf(o.cmd.ErrOrStderr(), "auditor: no cluster (%v): the cluster tools say so\n", err)
	} else {
		opts.Cluster = &cliCluster{o: &o.diff}
	}
	s, err := mcp.New(opts)
	if err != nil {
		return usageErr("--tools: %v", err)
	}
	t := &sdk.IOTransport{Reader: io.NopCloser(o.cmd.InOrStdin()), Writer: nopWriteCloser{w}}
	if err := s.Run(ctx, t); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return failed(err)
	}
	return nil
}

// repo opens --repo for the Git tools, once it opens: a failure (a server down, a repository
// not there yet) is tried again at the next call, never kept for the session.
func (o *mcpOptions) repo() func(context.Context) (*gitrepo.Repo, error) {
	var mu sync.Mutex
	var repo *gitrepo.Repo
	return func(ctx context.Context) (*gitrepo.Repo, error) {
		mu.Lock()
		defer mu.Unlock()
		if repo != nil {
			return repo, nil
		}
		r, err := gitOpts.open(context.WithoutCancel(ctx), o.diff.src.repo) // the clone outlives the call
		if err == nil {
			repo = r
		}
		return r, err
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// cliCluster answers the cluster tools by auditing, as diff does, one call at a time; it
// reaches the cluster on the first call.
type cliCluster struct {
	o *diffOptions

	mu   sync.Mutex
	repo *gitrepo.Repo
	a    *audit.Auditor
	err  error
}

func (c *cliCluster) auditor(ctx context.Context) (*audit.Auditor, error) {
	if c.a == nil { // a failure (the cluster unreachable) is tried again at the next call
		c.repo, c.a, c.err = c.o.auditor(context.WithoutCancel(ctx), nil) // the cache outlives the call
	}
	return c.a, c.err
}

// Envs are the repository's envs, once the cluster was reached (none before: a tool then names
// its env).
func (c *cliCluster) Envs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.a == nil {
		return nil
	}
	return c.a.Envs
}

// Report audits env as auditor diff does.
func (c *cliCluster) Report(ctx context.Context, env string) (*drift.Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.report(ctx, env)
}

func (c *cliCluster) report(ctx context.Context, env string) (*drift.Report, error) {
	a, err := c.auditor(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout)
	defer cancel()
	return a.Run(ctx, audit.Request{Env: env, Revision: c.o.src.revision})
}

// Blame walks the object's history from the revision Argo CD synced, as auditor blame does.
func (c *cliCluster) Blame(ctx context.Context, env, cluster string, ref blame.Ref) (*blame.Blame, error) {
	if cluster != "" {
		return nil, fmt.Errorf("blame of an object on cluster %s: start auditor mcp with --context of that cluster, or ask auditor serve", cluster)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rep, err := c.report(ctx, env)
	if err != nil {
		return nil, err
	}
	req := blame.Request{Env: env, Object: ref, Revision: rep.Revision, Applications: auditedApplications(rep, ref)}
	renders := render.NewCache("", 4)
	renders.Shared = true
	b, err := blame.Git(ctx, c.repo, req, blame.Options{Renders: renders, Types: blame.ClusterTypes(ctx, c.a.Live)})
	if err != nil {
		return nil, err
	}
	b.AddLive(c.a.Live, c.a.People, rep)
	return b, nil
}

// Episodes are the daemon's: this process keeps no history of drift.
func (c *cliCluster) Episodes(context.Context, string, int) ([]episode.Episode, []episode.Episode, error) {
	return nil, nil, errors.New("episodes are the daemon's history of drift: ask auditor serve at /mcp")
}
