package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

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
	v := checkView{verbose: true, width: outputWidth(w)}
	v.writeFindings(w, "VIOLATION", "", rep.Violations)
	v.writeFindings(w, "WARNING", "", rep.Warnings)
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
