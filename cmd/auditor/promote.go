package main

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// promoteOptions are the flags of `auditor promote`.
type promoteOptions struct {
	repo, branch, from, to, revision string
	output, reviewBranch, reason     string
	dryRun, skipStage, backwards     bool
	direct, force                    bool
	cmd                              *cobra.Command // whose stderr says what was read
}

// newPromoteCommand moves an env's pin by a promotion commit.
func newPromoteCommand() *cobra.Command {
	o := &promoteOptions{}
	cmd := &cobra.Command{
		Use:   "promote --from ENV --to ENV [--revision REV] [--repo DIR|URL] [--branch main] [--direct] [--dry-run]",
		Short: "Move an env's pinned release to another env's by a reviewed commit; show what changes; check it",
		Long: `promote sets the commit the --to env runs (data.revision of apps/<to>/release.yaml, which its
Applications take as targetRevision) to the --from env's release: its pin, or the branch head for
an env that follows the branch (dev). It prints what the move changes in the --to env's rendered
objects (each changed field, old and new value), then runs every rule and admission policy of
auditor check on the --to env at the new revision. A violation refuses the promotion (exit 1)
and writes nothing; --force with a --reason goes past it, and the reason goes into the commit's
Promote-Forced trailer and the ledger's records of it.

The promotion commit is made on the branch's head and pushed to a new branch for review
(promote/<to>-<revision>; --review-branch names another; one that exists is never replaced):
open a pull request from it into the branch, and the ledger records the promotion once it is merged (auditor ledger sync, or the
daemon). --direct commits on the branch itself (retrying when the branch moved; refused when
--to's pin moved since the diff was made) and appends the ledger's records at once. Reverting the
promotion commit is the rollback.

--dry-run prints the diff and the check only. The path is dev → staging → prod: --to prod takes
staging's release unless --skip-stage; moving an env back to an ancestor needs --backwards.

Exit codes: 0 promoted (or nothing to promote), 1 refused for violations, >1 error.`,
		Example: `  auditor promote --from dev --to staging --repo https://git.example.com/platform.git
  auditor promote --from staging --to prod --repo https://git.example.com/platform.git --dry-run
  auditor promote --from staging --to prod --repo https://git.example.com/platform.git --direct \
      --force --reason "INC-4711: the GPU limit is raised by the cloud team today"`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	flagErrorsExit2(cmd)
	addRepoFlag(cmd, &o.repo, "repository: a URL (or a bare repository directory)")
	cmd.Flags().StringVar(&o.branch, "branch", "main", "branch holding the release files")
	addEnvFlag(cmd, &o.from, "from", "env whose release is promoted (dev: the branch head)")
	addEnvFlag(cmd, &o.to, "to", "env whose pin moves")
	cmd.Flags().StringVar(&o.revision, "revision", "", "promote this commit of the branch instead of --from's release")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would change; commit nothing")
	cmd.Flags().BoolVar(&o.skipStage, "skip-stage", false, "promote from another env than the one before --to (dev → staging → prod), or a --revision")
	cmd.Flags().BoolVar(&o.backwards, "backwards", false, "allow moving --to back to an ancestor of what it runs")
	cmd.Flags().BoolVar(&o.direct, "direct", false, "commit on --branch itself rather than on a branch for review")
	cmd.Flags().StringVar(&o.reviewBranch, "review-branch", "", "the branch the promotion is pushed to for review (default promote/<to>-<revision>)")
	cmd.Flags().BoolVar(&o.force, "force", false, "promote past the check's violations (needs --reason)")
	cmd.Flags().StringVar(&o.reason, "reason", "", "why a --force promotion goes past its violations: kept in the commit and the ledger")
	addReportOutput(cmd, &o.output)
	return cmd
}

// Validate asks for --to and for --from or --revision.
func (o *promoteOptions) Validate() error {
	if o.to == "" {
		return usageErr("promote: --to is required")
	}
	if o.from == "" && o.revision == "" {
		return usageErr("promote: --from (or --revision) is required")
	}
	for _, env := range []string{o.from, o.to} {
		if strings.ContainsAny(env, `/\`) || env == "." || env == ".." {
			return usageErr("promote: invalid environment name %q", env)
		}
	}
	switch {
	case o.force && strings.TrimSpace(o.reason) == "":
		return usageErr("promote: --force needs a --reason: it is kept in the commit and the ledger")
	case !o.force && o.reason != "":
		return usageErr("promote: --reason goes with --force")
	case o.direct && o.reviewBranch != "":
		return usageErr("promote: --direct commits on --branch; --review-branch names the branch for review instead")
	case o.reviewBranch != "" && o.reviewBranch == o.branch:
		return usageErr("promote: --review-branch %s is --branch itself: name a new branch, or commit there with --direct", o.reviewBranch)
	}
	return nil
}

// Complete keeps the command, whose stderr says which tree was read.
func (o *promoteOptions) Complete(cmd *cobra.Command, _ []string) error { o.cmd = cmd; return nil }

// Run shows the diff, commits the promotion and records it in the ledger; with -o json or yaml,
// it says all that in one report at the end.
func (o *promoteOptions) Run(ctx context.Context, out io.Writer) error {
	if o.output == "text" {
		_, err := o.run(ctx, out)
		return err
	}
	rep, err := o.run(ctx, io.Discard)
	if rep != nil {
		if werr := writeReport(out, o.output, rep, nil); werr != nil && err == nil {
			return werr
		}
	}
	return err
}
