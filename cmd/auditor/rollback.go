package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// rollbackOptions are the flags and argument of `auditor rollback`.
type rollbackOptions struct {
	repo, branch, prom, output string
	envs                       []string
	sha                        string
	dryRun                     bool
}

// newRollbackCommand reverts a commit on the branch and records the rollback in the ledger.
func newRollbackCommand() *cobra.Command {
	o := &rollbackOptions{}
	cmd := &cobra.Command{
		Use:   "rollback SHA [--repo DIR|URL] [--branch main] [--env ENV]... [--prometheus URL]",
		Short: "Roll back a change by a revert commit, and record the rollback in the model ledger",
		Long: `rollback commits the reverse of SHA on the branch (git's revert message, line-level: later
commits that changed other lines are kept) and pushes it, retrying when the branch moved. It
refuses when a later commit changed the same lines, naming that commit. Then each environment's
ledger (--env; default, every env that has one: clusters/<env>/model-ledger.jsonl) gets rollback
records (reverts: SHA) for the served versions the revert changed, in a following commit of
auditor-bot. A rollback starts no ledger an env does not have, unless --env names it.`,
		Example: `  auditor rollback 3f2c1ab --repo https://git.example.com/platform.git --env prod`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("rollback takes exactly one commit")
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          runE(o),
	}
	flagErrorsExit2(cmd)
	addRepoFlag(cmd, &o.repo, "repository: a URL (or a bare repository directory)")
	cmd.Flags().StringVar(&o.branch, "branch", "main", "branch to revert on")
	cmd.Flags().StringSliceVar(&o.envs, "env", nil, "environments whose ledgers record the rollback (default: those that have a ledger)")
	markEnvFlag(cmd, "env")
	cmd.Flags().StringVar(&o.prom, "prometheus", "", "Prometheus base URL: metrics snapshot on the rollback records")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the revert and the ledger records it would add; push nothing")
	addReportOutput(cmd, &o.output)
	return cmd
}

// Complete takes the commit from the arguments.
func (o *rollbackOptions) Complete(_ *cobra.Command, args []string) error {
	o.sha = args[0]
	return nil
}

// Validate has nothing to check: -o is checked as it is parsed.
func (o *rollbackOptions) Validate() error { return nil }

// Run reverts the commit, records the rollback and says what it did.
func (o *rollbackOptions) Run(ctx context.Context, w io.Writer) error {
	remote, repo, err := openRemote(ctx, o.repo, o.dryRun)
	if err != nil {
		return err
	}
	if err := checkRepoEnvs(repo, o.branch, o.envs...); err != nil {
		return err
	}
	if after, ok := strings.CutPrefix(o.sha, "HEAD"); ok && (after == "" || strings.ContainsAny(after[:1], "~^")) {
		// HEAD is the branch's head on the remote, not the head of a clone or of the caller's checkout.
		h, err := repo.Resolve(o.branch + after)
		if err != nil {
			return failed(fmt.Errorf("rollback %s: %w", o.sha, err))
		}
		fmt.Fprintf(os.Stderr, "auditor: %s is %s, %s%s of %s\n", o.sha, gitrepo.Short(h), o.branch, after, gitrepo.RedactURL(o.repo))
		o.sha = h
	}
	req := ledger.RollbackRequest{Branch: o.branch, Envs: o.envs}
	if o.prom != "" {
		req.Metrics = (&ledger.Prometheus{URL: o.prom}).ForRecord
	}
	res, err := ledger.Rollback(ctx, remote, o.sha, req)
	var conflict *gitrepo.RevertConflictError
	switch {
	case errors.As(err, &conflict):
		return failed(fmt.Errorf("rollback refused: %w", err))
	case errors.Is(err, gitrepo.ErrNotOnBranch):
		return failed(fmt.Errorf("rollback %s: revision %q not found on branch %s of %s", o.sha, o.sha, o.branch, gitrepo.RedactURL(o.repo)))
	case err != nil && res.Revert.Commit == "" && !res.Revert.NoChange:
		return failed(err)
	}
	if o.output != "text" {
		if werr := writeReport(w, o.output, res.Summary(err), nil); werr != nil {
			return werr
		}
	} else if perr := o.print(w, res); perr != nil {
		return perr
	}
	if err != nil && o.dryRun {
		return failed(fmt.Errorf("dry run: the revert was built, but its ledger records could not be: %w", err))
	}
	if err != nil { // the revert is pushed, the ledger is not up to date
		return failed(fmt.Errorf("revert pushed, but the ledger was not updated (run `auditor ledger sync`): %w", err))
	}
	return nil
}

func (o *rollbackOptions) print(w io.Writer, res ledger.RollbackResult) error {
	switch {
	case res.Revert.NoChange:
		fmt.Fprintf(w, "%s is already reverted on %s\n", o.sha, o.branch)
	case res.Revert.DryRun:
		fmt.Fprintf(w, "would revert %s on %s (dry run: commit %s not pushed)\n", o.sha, o.branch, gitrepo.Short(res.Revert.Commit))
	default:
		fmt.Fprintf(w, "reverted %s: commit %s on %s (%d attempt(s))\n", o.sha, gitrepo.Short(res.Revert.Commit), o.branch, res.Revert.Attempts)
	}
	if records := res.Records(); len(records) > 0 {
		return printRecords(w, records)
	}
	fmt.Fprintln(w, "no served model changed: no ledger record")
	return nil
}
