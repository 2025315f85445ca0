package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// fireOptions are the flags of `auditor schedule fire`.
type fireOptions struct {
	env, peak, repo, author, branch string
	output                          string
	scaleDown, dryRun               bool
	person                          gitrepo.Person // --author, parsed
	at                              time.Time      // --at; zero is now
}

func newScheduleFireCommand() *cobra.Command {
	o := &fireOptions{}
	cmd := &cobra.Command{
		Use:   "fire --env ENV --peak NAME [--repo URL] [--at TIME] [--author 'Name <email>']",
		Short: "Fire one peak's scale-up (or --scale-down) by hand: commit and push it",
		Long: `fire commits the scale-up of one occurrence of a peak and pushes it, exactly once: a firing
already in the history (trailers Schedule-Id and Fire-Time) is not committed again.

It fires the occurrence in progress at --at (now by default), else the next one. An
occurrence is in progress from its fire time (peak start − lead time) to the peak's end. --repo is the repository to push to; a directory is pushed to
through file://.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	addEnvFlag(cmd, &o.env, "env", "environment (reads clusters/<env>/schedule.yaml)")
	f.StringVar(&o.peak, "peak", "", "peak name")
	_ = cmd.RegisterFlagCompletionFunc("peak", completePeaks)
	addRepoFlag(cmd, &o.repo, "repository URL to push to (file://, https://, ssh://) or a directory")
	addZonedAtFlag(cmd, &o.at, "fire the occurrence in progress at this time, else the next one", "")
	f.StringVar(&o.author, "author", "Schedule Bot <schedule@llm-gitops.invalid>", "commit author, 'Name <email>'")
	f.StringVar(&o.branch, "branch", "main", "branch to commit to")
	f.BoolVar(&o.scaleDown, "scale-down", false, "undo the occurrence's scale-up instead")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the change and the commit it would push; push nothing")
	addReportOutput(cmd, &o.output)
	return cmd
}

// Complete has nothing to fill.
func (o *fireOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate rejects a missing --env or --peak and a malformed --author.
func (o *fireOptions) Validate() error {
	if o.env == "" || o.peak == "" {
		return usageErr("--env and --peak are required")
	}
	addr, err := mail.ParseAddress(o.author)
	if err != nil || addr.Name == "" {
		return usageErr("--author %q: want 'Name <email>'", o.author)
	}
	o.person = gitrepo.Person{Name: addr.Name, Email: addr.Address}
	return nil
}

// Run commits and pushes the firing (or its scale-down) and says what it did.
func (o *fireOptions) Run(ctx context.Context, w io.Writer) error {
	remote, err := gitOpts.remote(o.repo, o.dryRun)
	if err != nil {
		return usageErr("--repo: %v", err)
	}
	repo, err := gitOpts.openRemote(ctx, remote)
	if err != nil {
		return err
	}
	if err := checkRepoEnvs(repo, o.branch, o.env); err != nil {
		return err
	}
	snap, err := repo.Snapshot(o.branch)
	if err != nil {
		return err
	}
	s, err := schedule.Load(snap, o.env)
	if err != nil {
		return scheduleErr(err)
	}
	p, fireTime, err := o.occurrence(s)
	if err != nil {
		return err
	}
	opts := schedule.FireOptions{Branch: o.branch, Author: o.person}
	var res *schedule.Result
	if o.scaleDown {
		res, err = s.ScaleDown(ctx, remote, p.Name, fireTime, opts)
	} else {
		res, err = s.Fire(ctx, remote, p.Name, fireTime, opts)
	}
	if res != nil && o.output != "text" {
		f := res.Firing
		rep := fireReport{Phase: string(res.Phase), Peak: p.Name, FireTime: f.FireTime, Start: f.Start, End: f.End,
			LeadSeconds: f.Lead.Total.Seconds(), NoChange: res.NoChange, Reason: res.Reason, File: res.File, Line: res.Line,
			From: res.From, To: res.To, Commit: res.Commit, DryRun: o.dryRun && res.Commit != "", Attempts: res.Attempts, Remote: remote.URL(), Branch: o.branch}
		if werr := writeReport(w, o.output, rep, nil); werr != nil {
			return werr
		}
	} else if res != nil {
		f := res.Firing
		fmt.Fprintf(w, "%s %s: fire time %s, peak %s → %s\n", res.Phase, p.Name,
			f.FireTime.In(p.Location).Format(time.RFC3339), f.Start.In(p.Location).Format(time.RFC3339), f.End.In(p.Location).Format(time.RFC3339))
		fmt.Fprintf(w, "  lead    %s\n", f.Lead)
		switch {
		case res.NoChange:
			fmt.Fprintf(w, "  no commit: %s\n", res.Reason)
		case res.Commit != "":
			where := ""
			if res.File != "" && res.File != p.Target.Path {
				where = " in " + res.File + "'s kustomize patches (the env is pinned)"
			}
			fmt.Fprintf(w, "  change  %s: %d → %d%s (line %d)\n", p.Target, res.From, res.To, where, res.Line)
			if o.dryRun {
				fmt.Fprintf(w, "  commit  %s, not pushed (dry run)\n", res.Commit)
			} else {
				fmt.Fprintf(w, "  commit  %s pushed to %s/%s after %d attempt(s)\n", res.Commit, remote.URL(), o.branch, res.Attempts)
			}
		}
	}
	var late *schedule.DeadlineError
	if o.dryRun && errors.As(err, &late) && late.Landed {
		return found(fmt.Sprintf("dry run: pushed now, the scale-up of %s would land after its deadline %s (peak start − cold start)",
			p.Name, late.Deadline.In(p.Location).Format(time.RFC3339)))
	}
	return scheduleErr(err)
}

// occurrence is the peak --peak names and the fire time of the occurrence to fire: the one in
// progress at --at (now by default), else the next.
func (o *fireOptions) occurrence(s *schedule.Schedule) (*schedule.Peak, time.Time, error) {
	p := s.Peak(o.peak)
	if p == nil {
		var names []string
		for _, q := range s.Peaks {
			names = append(names, q.Name)
		}
		return nil, time.Time{}, usageErr("no peak %q in %s (peaks: %s)", o.peak, schedule.Path(o.env), strings.Join(names, ", "))
	}
	at := orNow(o.at)
	f, ok := s.Current(p, at) // the first occurrence that ends after at
	if !ok {
		return nil, time.Time{}, usageErr("peak %s has no occurrence in progress or to come", p.Name)
	}
	for { // where windows overlap, the latest one that has fired by at (at a fire time: its own)
		start, ok := p.NextStart(f.Start)
		if !ok {
			break
		}
		next := s.FiringAt(p, start.Add(-s.Lead.Total))
		if next.FireTime.After(at) {
			break
		}
		f = next
	}
	return p, f.FireTime, nil
}
