package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// ledgerStackOptions are the flags of `auditor ledger stack`.
type ledgerStackOptions struct {
	ledgerWrite
	healthyAt string
	at        time.Time
	dryRun    bool
}

func newLedgerStackCommand() *cobra.Command {
	o := &ledgerStackOptions{}
	cmd := &cobra.Command{
		Use:   "stack --env ENV [--healthy-at TIME] [--repo DIR|URL] [--branch main]",
		Short: "Record that an env runs its GPU stack triple healthy (clusters/<env>/gpu-stack-ledger.jsonl)",
		Long: `stack reads the GPU stack triple the env runs at the branch head (its pin: AMI and driver, image
digest and CUDA, GPU Operator; clusters/gpu-stack.yaml) and appends it to the env's GPU stack
ledger with the time it became healthy (--healthy-at, RFC 3339; default now). Run it once the
env's GPU nodes run the AMI and its vLLM Deployments are available. auditor promote --to prod
reads staging's ledger: it refuses a new triple staging has not run healthy for the soak time.
A triple the ledger has already keeps its earliest time.`,
		Example: `  auditor ledger stack --env staging --repo https://git.example.com/platform.git --healthy-at 2026-12-01T09:00:00Z`,
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
	o.ledgerWrite.add(cmd)
	cmd.Flags().StringVar(&o.healthyAt, "healthy-at", "", "when the triple became healthy in the env (RFC 3339; default now)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the record that would be appended; push nothing")
	return cmd
}

// Validate reads --healthy-at.
func (o *ledgerStackOptions) Validate() error {
	if err := o.ledgerWrite.Validate(); err != nil {
		return err
	}
	o.at = time.Now().UTC().Truncate(time.Second)
	if o.healthyAt != "" {
		at, err := time.Parse(time.RFC3339, o.healthyAt)
		if err != nil {
			return usageErr("--healthy-at: %v", err)
		}
		o.at = at.UTC()
	}
	return nil
}

// Run appends the triple and says what it committed.
func (o *ledgerStackOptions) Run(ctx context.Context, w io.Writer) error {
	remote, repo, err := openRemote(ctx, o.repo, o.dryRun)
	if err != nil {
		return err
	}
	if err := checkRepoEnvs(repo, o.branch, o.env); err != nil {
		return err
	}
	head, err := repo.Resolve(o.branch)
	if err != nil {
		return failed(err)
	}
	triple, rev, err := check.EnvStack(repo, head, o.env)
	if err != nil {
		return failed(err)
	}
	if triple == nil {
		return failed(fmt.Errorf("%s at %s runs no GPU stack triple (no GPUs, or no clusters/gpu-stack.yaml there)", o.env, gitrepo.Short(rev)))
	}
	if err := o.checkHealthyAt(repo, rev); err != nil {
		return err
	}
	rec := ledger.StackRecord{Env: o.env, Triple: *triple, Revision: rev, HealthyAt: o.at}
	res, err := ledger.AppendStack(ctx, remote, o.branch, rec, time.Now().Add(2*time.Minute))
	if err != nil {
		return failed(err)
	}
	rep := ledgerWriteReport{File: ledger.StackPath(o.env), Commit: res.Commit, NoChange: res.NoChange, DryRun: res.DryRun}
	if !res.NoChange {
		rep.Records = 1
	}
	return writeReport(w, o.output, rep, func() error {
		if res.NoChange {
			_, err := fmt.Fprintf(w, "%s: has %s already\n", rep.File, triple)
			return err
		}
		pushed := ""
		if res.DryRun {
			pushed = " (dry run: not pushed)"
		}
		_, err := fmt.Fprintf(w, "%s: %s healthy since %s, commit %s%s\n", rep.File, triple, o.at.Format(time.RFC3339), gitrepo.Short(res.Commit), pushed)
		return err
	})
}

// checkHealthyAt refuses a time the env cannot have run its triple healthy at: in the future, or
// before the revision it runs was committed. A back-dated record would count as soak the env
// never did. (A time between that commit and the promotion that pinned it is not caught.)
func (o *ledgerStackOptions) checkHealthyAt(repo *gitrepo.Repo, rev string) error {
	if o.at.After(time.Now().Add(time.Minute)) {
		return usageErr("--healthy-at %s is in the future", o.at.Format(time.RFC3339))
	}
	c, err := repo.CommitOf(rev)
	if err != nil {
		return failed(err)
	}
	if since := c.Committer.When.UTC().Truncate(time.Second); o.at.Before(since) {
		return usageErr("--healthy-at %s is before %s's revision %s was committed (%s): it cannot have run the triple healthy then",
			o.at.Format(time.RFC3339), o.env, gitrepo.Short(rev), since.Format(time.RFC3339))
	}
	return nil
}
