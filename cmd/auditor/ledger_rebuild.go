package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// ledgerRebuildOptions are the flags of `auditor ledger rebuild`.
type ledgerRebuildOptions struct {
	ledgerWrite
	dryRun, force bool
}

func newLedgerRebuildCommand() *cobra.Command {
	o := &ledgerRebuildOptions{}
	cmd := &cobra.Command{
		Use:   "rebuild --env ENV [--repo DIR|URL] [--branch main] [--dry-run] [--force]",
		Short: "Rebuild an environment's ledger from the history of its manifests",
		Long: `rebuild walks the first-parent commits of the branch that touched overlays/<env>, base/ or
components/, renders each, and turns every change of the served models into a record; reverts
give rollback records. --dry-run prints the JSON Lines (-o json, -o yaml: a list); otherwise the ledger file is replaced by
a commit of auditor-bot (syncedAt and metrics of records already there are kept). A malformed
existing ledger is only overwritten with --force.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.ledgerWrite.add(cmd)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the rebuilt ledger instead of committing it")
	cmd.Flags().BoolVar(&o.force, "force", false, "overwrite a malformed ledger")
	return cmd
}

// Run prints the rebuilt ledger (--dry-run) or commits it.
func (o *ledgerRebuildOptions) Run(ctx context.Context, w io.Writer) error {
	if o.dryRun {
		return o.print(ctx, w)
	}
	remote, repo, err := openRemote(ctx, o.repo, false)
	if err != nil {
		return err
	}
	head, err := repo.Resolve(o.branch)
	if err != nil {
		return failed(err)
	}
	if err := checkRepoEnvs(repo, head, o.env); err != nil {
		return err
	}
	recs, err := ledger.Records(ctx, repo, o.env, "", head)
	if err != nil {
		return failed(err)
	}
	res, err := ledger.Replace(ctx, remote, o.env, o.branch, recs, head, o.force)
	if err != nil {
		return failed(err)
	}
	rep := ledgerWriteReport{File: ledger.Path(o.env), Records: len(recs), Commit: res.Commit, NoChange: res.NoChange}
	return writeReport(w, o.output, rep, func() error {
		if res.NoChange {
			_, err := fmt.Fprintf(w, "%s: ledger up to date (%d records)\n", rep.File, len(recs))
			return err
		}
		_, err := fmt.Fprintf(w, "%s: %d records, commit %s\n", rep.File, len(recs), gitrepo.Short(res.Commit))
		return err
	})
}

// print writes the rebuilt ledger as JSON Lines, or a JSON or YAML list.
func (o *ledgerRebuildOptions) print(ctx context.Context, w io.Writer) error {
	repo, err := openLedgerRepo(o.repo)
	if err != nil {
		return err
	}
	rev := ""
	if gitrepo.IsURL(o.repo) {
		rev = o.branch
	}
	if err := checkRepoEnvs(repo, rev, o.env); err != nil {
		return err
	}
	recs, err := ledger.Records(ctx, repo, o.env, "", rev)
	if err != nil {
		return failed(err)
	}
	if o.output != "text" {
		if recs == nil {
			recs = []ledger.Record{}
		}
		return writeReport(w, o.output, recs, nil)
	}
	data, err := ledger.Marshal(recs)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
