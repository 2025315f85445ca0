package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// ledgerSyncOptions are the flags of `auditor ledger sync`.
type ledgerSyncOptions struct {
	ledgerWrite
	prom, window string
	dryRun       bool
}

func newLedgerSyncCommand() *cobra.Command {
	o := &ledgerSyncOptions{}
	cmd := &cobra.Command{
		Use:   "sync --env ENV [--repo DIR|URL] [--branch main] [--prometheus URL]",
		Short: "Append the records of the commits since the ledger's Synced-Revision",
		Long: `sync computes the records of the commits after the revision named by the last ledger commit's
Synced-Revision trailer up to the branch head and appends those not in the ledger yet. With
--prometheus, each new record of a serving version gets a metrics snapshot (e2e latency and TTFT
p50/p95, error rate = aborted / finished requests) from the Prometheus HTTP API.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.ledgerWrite.add(cmd)
	cmd.Flags().StringVar(&o.prom, "prometheus", "", "Prometheus base URL for metrics snapshots (none: no snapshot)")
	cmd.Flags().StringVar(&o.window, "window", "5m", "rate window of the metrics queries")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the records that would be appended; push nothing")
	return cmd
}

// Run appends the new records and says what it committed.
func (o *ledgerSyncOptions) Run(ctx context.Context, w io.Writer) error {
	remote, repo, err := openRemote(ctx, o.repo, o.dryRun)
	if err != nil {
		return err
	}
	if err := checkRepoEnvs(repo, o.branch, o.env); err != nil {
		return err
	}
	req := ledger.SyncRequest{Env: o.env, Branch: o.branch}
	if o.prom != "" {
		req.Metrics = (&ledger.Prometheus{URL: o.prom, Window: o.window}).ForRecord
	}
	res, err := ledger.Sync(ctx, remote, req)
	if err != nil {
		return failed(err)
	}
	rep := ledgerWriteReport{File: ledger.Path(o.env), Records: res.Appended, Commit: res.Result.Commit,
		NoChange: res.Appended == 0, DryRun: res.Result.DryRun}
	return writeReport(w, o.output, rep, func() error {
		if rep.NoChange {
			_, err := fmt.Fprintf(w, "%s: up to date\n", rep.File)
			return err
		}
		if rep.DryRun {
			fmt.Fprintf(w, "%s: %d records would be appended (dry run: commit %s not pushed)\n", rep.File, res.Appended, gitrepo.Short(res.Result.Commit))
			return printRecords(w, res.Records)
		}
		_, err := fmt.Fprintf(w, "%s: %d records appended, commit %s\n", rep.File, res.Appended, gitrepo.Short(res.Result.Commit))
		return err
	})
}
