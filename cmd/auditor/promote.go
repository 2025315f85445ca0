package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/check"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/ledger"
	"github.com/llm-gitops/platform/internal/release"
	"github.com/llm-gitops/platform/internal/render"
)

// promoteOptions are the flags of `auditor promote`.
type promoteOptions struct {
	repo, branch, from, to, revision string
	output                           string
	dryRun, skipStage, backwards     bool
}

// newPromoteCommand moves an env's pin by a promotion commit.
func newPromoteCommand() *cobra.Command {
	o := &promoteOptions{}
	cmd := &cobra.Command{
		Use:   "promote --from ENV --to ENV [--revision REV] [--repo DIR|URL] [--branch main] [--dry-run]",
		Short: "Move an env's pinned release to another env's, by a commit; show what changes; record it in the ledger",
		Long: `promote sets the commit the --to env runs (data.revision of apps/<to>/release.yaml, which its
Applications take as targetRevision) to the --from env's release: its pin, or the branch head for
an env that follows the branch (dev). It first prints what the move changes in the --to env's
rendered objects (each changed field, old and new value), then commits on the branch (retrying
when the branch moved; refused when --to's pin moved since the diff was made) and appends the
model ledger's records of the promotion. Reverting the promotion commit is the rollback.
--dry-run prints the diff only. The path is dev → staging → prod: --to prod takes staging's
release unless --skip-stage; moving an env back to an ancestor needs --backwards.`,
		Example: `  auditor promote --from dev --to staging --repo https://git.example.com/platform.git
  auditor promote --from staging --to prod --repo https://git.example.com/platform.git`,
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
	return nil
}

// Complete has nothing to fill.
func (o *promoteOptions) Complete(*cobra.Command, []string) error { return nil }

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

// run is Run writing text to w, and the report of what it did (nil before the plan is made).
func (o *promoteOptions) run(ctx context.Context, w io.Writer) (*promoteReport, error) {
	remote, repo, err := openRemote(ctx, o.repo, false)
	if err != nil {
		return nil, err
	}
	if err := checkRepoEnvs(repo, o.branch, o.from, o.to); err != nil {
		return nil, err
	}
	req := release.Request{From: o.from, To: o.to, Revision: o.revision, Branch: o.branch, SkipStage: o.skipStage, Backwards: o.backwards}
	plan, err := release.Resolve(repo, req)
	if err != nil {
		return nil, failed(err)
	}
	rep := &promoteReport{From: o.from, To: o.to, Old: plan.Old, New: plan.New, Backwards: plan.Backwards, Changes: []check.Change{}}
	if plan.NoChange() {
		fmt.Fprintf(w, "%s already runs %s: nothing to promote\n", o.to, gitrepo.Short(plan.New))
		rep.NoChange = true
		return rep, nil
	}
	// Both sides with the patches --to's Application carries on main (its scheduled scale-ups):
	// the diff is what the move changes in what --to runs.
	head, err := render.AtRevision(repo, plan.Head)
	if err != nil {
		return nil, failed(err)
	}
	patches, err := release.ApplicationPatches(head, o.to)
	if err != nil {
		return nil, failed(err)
	}
	changes, err := check.EnvDiff(repo, o.to, plan.Old, plan.New, patches)
	if err != nil {
		return nil, failed(err)
	}
	if changes != nil {
		rep.Changes = changes
	}
	direction := ""
	if plan.Backwards {
		direction = " (back)"
	}
	fmt.Fprintf(w, "promote %s → %s: %s → %s%s, %d objects change\n", orRevision(o.from, plan.New), o.to,
		gitrepo.Short(plan.Old), gitrepo.Short(plan.New), direction, len(changes))
	writeChanges(w, changes)
	if o.dryRun {
		return rep, nil
	}
	res, err := release.Promote(ctx, remote, plan, req)
	if err != nil {
		return rep, failed(err)
	}
	rep.NoChange, rep.Commit, rep.Attempts = res.NoChange, res.Commit, res.Attempts
	if res.NoChange {
		fmt.Fprintf(w, "%s was promoted to %s meanwhile: no commit\n", o.to, gitrepo.Short(plan.New))
		return rep, nil
	}
	fmt.Fprintf(w, "committed %s on %s (%d attempt(s)); revert it to roll %s back\n", gitrepo.Short(res.Commit), o.branch, res.Attempts, o.to)
	synced, err := ledger.Sync(ctx, remote, ledger.SyncRequest{Env: o.to, Branch: o.branch, Revision: res.Commit})
	if err != nil {
		return rep, failed(fmt.Errorf("promotion pushed, but the ledger was not updated (run `auditor ledger sync --env %s`): %w", o.to, err))
	}
	if synced.Appended > 0 {
		fmt.Fprintf(w, "%s: %d records appended, commit %s\n", ledger.Path(o.to), synced.Appended, gitrepo.Short(synced.Result.Commit))
		rep.Ledger = &ledgerWriteReport{File: ledger.Path(o.to), Records: synced.Appended, Commit: synced.Result.Commit}
	}
	return rep, nil
}

func orRevision(env, rev string) string {
	if env == "" {
		return gitrepo.Short(rev)
	}
	return env
}

// writeChanges prints each changed object and its fields' old and new values; a Secret's values
// are never printed.
func writeChanges(w io.Writer, changes []check.Change) {
	for _, c := range changes {
		sign := map[string]string{"added": "+", "removed": "-", "changed": "~"}[c.Change]
		fmt.Fprintf(w, "%s %s (%s)\n", sign, objectID(c.Kind, c.Namespace, c.Name), c.Change)
		for _, f := range c.Fields {
			if c.Kind == "Secret" {
				fmt.Fprintf(w, "    %s: (%s, value hidden)\n", f.Path, f.Change)
				continue
			}
			fmt.Fprintf(w, "    %s: %s → %s\n", f.Path, short(f.From), short(f.To))
		}
	}
}
