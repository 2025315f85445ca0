package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/ledger"
)

// newRollbackCommand reverts a commit on the branch and records the rollback in the ledger.
func newRollbackCommand() *cobra.Command {
	var repoFlag, branch, prom, output string
	var envs []string
	cmd := &cobra.Command{
		Use:   "rollback SHA [--repo DIR|URL] [--branch main] [--env ENV]... [--prometheus URL]",
		Short: "Roll back a change by a revert commit, and record the rollback in the model ledger",
		Long: `rollback commits the reverse of SHA on the branch (git's revert message, line-level: later
commits that changed other lines are kept) and pushes it, retrying when the branch moved. It
refuses when a later commit changed the same lines, naming that commit. Then each environment's
ledger (--env, default all) gets rollback records (reverts: SHA) for the served versions the
revert changed, in a following commit of auditor-bot.`,
		Example: `  auditor rollback 3f2c1ab --repo https://git.example.com/platform.git --env prod`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("rollback takes exactly one commit")
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutputFormat(output); err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			remote, err := remoteFor(repoFlag)
			if err != nil {
				return err
			}
			req := ledger.RollbackRequest{Branch: branch, Envs: envs}
			if prom != "" {
				req.Metrics = (&ledger.Prometheus{URL: prom}).ForRecord
			}
			res, err := ledger.Rollback(ctx, remote, args[0], req)
			var conflict *gitrepo.RevertConflictError
			switch {
			case errors.As(err, &conflict):
				return &exitError{code: 2, err: fmt.Errorf("rollback refused: %w", err)}
			case err != nil && res.Revert.Commit == "" && !res.Revert.NoChange:
				return &exitError{code: 2, err: err}
			}
			var records []ledger.Record
			for _, s := range res.Synced {
				records = append(records, s.Records...)
			}
			if output == "json" {
				out := struct {
					Revert   string          `json:"revert,omitempty"`
					NoChange bool            `json:"noChange,omitempty"`
					Records  []ledger.Record `json:"records"`
					Error    string          `json:"error,omitempty"`
				}{Revert: res.Revert.Commit, NoChange: res.Revert.NoChange, Records: records}
				if out.Records == nil {
					out.Records = []ledger.Record{}
				}
				if err != nil {
					out.Error = err.Error()
				}
				if werr := writeJSON(cmd.OutOrStdout(), out); werr != nil {
					return werr
				}
			} else {
				w := cmd.OutOrStdout()
				if res.Revert.NoChange {
					fmt.Fprintf(w, "%s is already reverted on %s\n", args[0], branch)
				} else {
					fmt.Fprintf(w, "reverted %s: commit %s on %s (%d attempt(s))\n", args[0], gitrepo.Short(res.Revert.Commit), branch, res.Revert.Attempts)
				}
				if len(records) > 0 {
					if perr := printRecords(w, records); perr != nil {
						return perr
					}
				} else {
					fmt.Fprintln(w, "no served model changed: no ledger record")
				}
			}
			if err != nil { // the revert is pushed, the ledger is not up to date
				return &exitError{code: 2, err: fmt.Errorf("revert pushed, but the ledger was not updated (run `auditor ledger sync`): %w", err)}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	cmd.Flags().StringVar(&repoFlag, "repo", ".", "repository: a URL (or a bare repository directory)")
	cmd.Flags().StringVar(&branch, "branch", "main", "branch to revert on")
	cmd.Flags().StringSliceVar(&envs, "env", nil, "environments whose ledgers record the rollback (default: all)")
	cmd.Flags().StringVar(&prom, "prometheus", "", "Prometheus base URL: metrics snapshot on the rollback records")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
