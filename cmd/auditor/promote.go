package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/ledger"
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
	if o.cmd != nil {
		fmt.Fprintf(o.cmd.ErrOrStderr(), "auditor: read %s; %s runs %s, would run %s\n",
			readAt(o.repo, o.branch, plan.Head), o.to, gitrepo.Short(plan.Old), gitrepo.Short(plan.New))
	}
	rep := &promoteReport{From: o.from, To: o.to, Old: plan.Old, New: plan.New, Backwards: plan.Backwards, Changes: []check.Change{}}
	if plan.NoChange() {
		fmt.Fprintf(w, "%s already runs %s, %s's release: nothing to promote\n", o.to, gitrepo.Short(plan.New), orRevision(o.from, plan.New))
		rep.NoChange = true
		return rep, nil
	}
	// Both sides with the patches --to's Application carries on main (its scheduled scale-ups)
	// and its other Applications there: the diff is what the move changes in what --to runs,
	// and the rules judge what it would run.
	judged, err := check.Promotion(repo, o.to, plan.Head, plan.Old, plan.New)
	if err != nil {
		return nil, failed(fmt.Errorf("check %s at %s: %w", o.to, gitrepo.Short(plan.New), err))
	}
	changes := judged.Changes
	if changes != nil {
		rep.Changes = changes
	}
	rep.Violations, rep.Warnings = judged.Violations, judged.Warnings
	direction := ""
	if plan.Backwards {
		direction = " (back)"
	}
	fmt.Fprintf(w, "promote %s → %s: %s → %s%s, %d objects change\n", orRevision(o.from, plan.New), o.to,
		gitrepo.Short(plan.Old), gitrepo.Short(plan.New), direction, len(changes))
	writeChanges(w, changes)
	fmt.Fprintf(w, "check %s at %s: %s\n", o.to, gitrepo.Short(plan.New), count(len(rep.Violations), "violation"))
	writeFindings(w, false, "VIOLATION", "", rep.Violations)
	writeFindings(w, false, "WARNING", "", rep.Warnings)
	refused := len(rep.Violations) > 0 && !o.force
	switch {
	case refused:
		msg := fmt.Sprintf("promotion refused: %s at %s breaks %s; nothing was written (fix them on %s, or --force --reason)",
			o.to, gitrepo.Short(plan.New), count(len(rep.Violations), "rule"), o.branch)
		if o.dryRun {
			msg = fmt.Sprintf("%s at %s breaks %s: the promotion would be refused", o.to, gitrepo.Short(plan.New), count(len(rep.Violations), "rule"))
		}
		fmt.Fprintln(w, msg)
		return rep, found(msg)
	case len(rep.Violations) > 0:
		req.Forced, rep.Forced = o.reason, o.reason
		for _, v := range rep.Violations {
			req.ForcedPast = append(req.ForcedPast, v.Rule+" "+v.Object)
			req.ForcedMessages = append(req.ForcedMessages, v.Rule+" "+v.Object+": "+v.Message)
		}
		fmt.Fprintf(w, "forced past %s: %s\n", count(len(rep.Violations), "violation"), o.reason)
	}
	if o.dryRun {
		fmt.Fprintln(w, "dry run: nothing was written")
		return rep, nil
	}
	if req.Checked, err = repo.Snapshot(plan.Head); err != nil {
		return rep, failed(err)
	}
	if !o.direct {
		req.ReviewBranch = o.reviewBranch
		if req.ReviewBranch == "" {
			req.ReviewBranch = release.ReviewBranch(o.to, plan.New)
		}
	}
	res, err := release.Promote(ctx, remote, plan, req)
	if errors.Is(err, gitrepo.ErrBranchExists) {
		return rep, failed(fmt.Errorf("%w: a review of this promotion may be open; merge or delete branch %s, or name another with --review-branch", err, req.ReviewBranch))
	}
	if err != nil {
		return rep, failed(err)
	}
	rep.NoChange, rep.Commit, rep.Attempts, rep.Branch = res.NoChange, res.Commit, res.Attempts, o.branch
	if res.NoChange {
		fmt.Fprintf(w, "%s was promoted to %s meanwhile: no commit\n", o.to, gitrepo.Short(plan.New))
		return rep, nil
	}
	if req.ReviewBranch != "" {
		rep.Branch = req.ReviewBranch
		fmt.Fprintf(w, "pushed %s to branch %s for review (%d attempt(s)); open a pull request from %s into %s.\n"+
			"Once it is merged, auditor ledger sync --env %s records it (the daemon does it by itself).\n",
			gitrepo.Short(res.Commit), req.ReviewBranch, res.Attempts, req.ReviewBranch, o.branch, o.to)
		return rep, nil
	}
	fmt.Fprintf(w, "committed %s on %s (%d attempt(s)); revert it to roll %s back\n", gitrepo.Short(res.Commit), o.branch, res.Attempts, o.to)
	synced, err := ledger.Sync(ctx, remote, ledger.SyncRequest{Env: o.to, Branch: o.branch, Revision: res.Commit})
	if err != nil {
		return rep, failed(fmt.Errorf("promotion pushed, but the ledger was not updated (run `auditor ledger sync --env %s`): %w", o.to, err))
	}
	if synced.Appended == 0 && rep.Forced != "" {
		fmt.Fprintf(w, "%s: no record (the promotion changes no served model); the reason is in the commit's %s trailer\n", ledger.Path(o.to), release.TrailerForced)
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
