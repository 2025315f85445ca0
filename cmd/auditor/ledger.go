package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// newLedgerCommand groups the model ledger commands: list, at, show, rebuild, sync.
func newLedgerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger (list|at|show|rebuild|sync) [flags]",
		Short: "The model ledger: which model versions served where, at what traffic shares, since when",
		Long: `The model ledger records every change of a served model (a vLLM Deployment) in an environment:
added, changed (weights, share, image, replicas), retired, or rolled back by a revert commit.
It lives in Git as clusters/<env>/model-ledger.jsonl (never synced by Argo CD), appended by
commits of auditor-bot with a Synced-Revision trailer, and can be rebuilt from history alone.

Queries read the ledger at the repository's HEAD (main for a URL).`,
		Args:          groupArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flagErrorsExit2(cmd)
	cmd.AddCommand(newLedgerListCommand(), newLedgerAtCommand(), newLedgerShowCommand(),
		newLedgerRebuildCommand(), newLedgerSyncCommand(), newLedgerStackCommand())
	return cmd
}

// ledgerQuery are the flags of the ledger's read-only commands.
type ledgerQuery struct {
	repo, env, output string
	cmd               *cobra.Command // whose stderr says what was read
}

func (q *ledgerQuery) add(cmd *cobra.Command, envHelp string) {
	q.cmd = cmd
	addRepoFlag(cmd, &q.repo, "repository: a directory or a URL (file://, https://, ssh://)")
	addEnvFlag(cmd, &q.env, "env", envHelp)
	if cmd.Name() == "list" { // the one ledger table with more columns than fit a line
		addOutputFlag(cmd, &q.output, "wide: the table with the namespace, weights, image, author and sync time", append(reportFormats, "wide")...)
		return
	}
	addReportOutput(cmd, &q.output)
}

// records reads the ledger of the env (every env with a ledger when empty) at --repo's HEAD.
func (q *ledgerQuery) records() ([]ledger.Record, error) {
	repo, err := openLedgerRepo(q.repo)
	if err != nil {
		return nil, err
	}
	if err := checkRepoEnvs(repo, "", q.env); err != nil {
		return nil, err
	}
	if head, err := repo.Resolve(""); err == nil && q.cmd != nil {
		fmt.Fprintf(q.cmd.ErrOrStderr(), "auditor: read the ledger of %s\n", readAt(q.repo, "HEAD", head))
	}
	return readLedgers(repo, q.env)
}

// openLedgerRepo opens --repo (a directory or a URL).
func openLedgerRepo(location string) (*gitrepo.Repo, error) {
	repo, err := gitOpts.open(context.Background(), location)
	return repo, failed(err)
}

// readLedgers reads the ledger of env (every env with a ledger when empty) at HEAD.
func readLedgers(repo *gitrepo.Repo, env string) ([]ledger.Record, error) {
	envs := []string{env}
	if env == "" {
		var err error
		if envs, err = ledger.Envs(repo, ""); err != nil {
			return nil, failed(err)
		}
	}
	var all []ledger.Record
	for _, e := range envs {
		recs, err := ledger.Read(repo, e, "")
		if err != nil {
			return nil, failed(err)
		}
		all = append(all, recs...)
	}
	return all, nil
}

// openRemote makes a writable remote of --repo (a URL as is, a directory as file://) with the
// Git flags' credentials, and the repository it reads, cloned once. With dryRun nothing it
// commits is pushed.
func openRemote(ctx context.Context, location string, dryRun bool) (*gitrepo.Remote, *gitrepo.Repo, error) {
	remote, err := gitOpts.remote(location, dryRun)
	if err != nil {
		return nil, nil, failed(err)
	}
	repo, err := gitOpts.openRemote(ctx, remote)
	if err != nil {
		return nil, nil, failed(err)
	}
	return remote, repo, nil
}

// ledgerWrite are the flags of the ledger commands that commit to a branch: the repository, the
// env (required) and the branch; Complete and Validate are theirs too.
type ledgerWrite struct {
	repo, env, branch, output string
}

func (o *ledgerWrite) add(cmd *cobra.Command) {
	addRepoFlag(cmd, &o.repo, "repository: a directory (bare, to write) or a URL")
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
	cmd.Flags().StringVar(&o.branch, "branch", "main", "branch to read and write")
	addReportOutput(cmd, &o.output)
}

// Complete has nothing to fill.
func (o *ledgerWrite) Complete(*cobra.Command, []string) error { return nil }

// Validate rejects a missing --env.
func (o *ledgerWrite) Validate() error {
	if o.env == "" {
		return usageErr("--env is required")
	}
	return nil
}
