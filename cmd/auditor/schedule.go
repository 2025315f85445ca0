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

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/schedule"
)

// newScheduleCommand groups the scheduled pre-peak scale-ups: plan and fire.
func newScheduleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule (plan|fire) [flags]",
		Short: "Scheduled pre-peak scale-ups written as Git commits (clusters/<env>/schedule.yaml)",
		Long: `schedule reads clusters/<env>/schedule.yaml: known traffic peaks, each raising a KEDA
ScaledObject's minReplicaCount (or an HPA's minReplicas) in the overlay ahead of the peak by the
lead time (Argo CD sync delay + cold start + margin), and reverting it when the peak is over.

Exit codes: 0 fine, 1 the firing missed its deadline, 2 bad input (a malformed schedule is
reported as file:line).`,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	cmd.AddCommand(newSchedulePlanCommand(), newScheduleFireCommand())
	return cmd
}

// scheduleErr maps schedule errors to exit codes: malformed schedule 2, missed deadline 1.
func scheduleErr(err error) error {
	var el schedule.ErrorList
	var de *schedule.DeadlineError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &el), errors.Is(err, schedule.ErrNoSchedule):
		return &exitError{code: 2, err: err}
	case errors.As(err, &de):
		return &exitError{code: 1, err: err}
	}
	return err
}

type planChange struct {
	File   string `json:"file"`
	Object string `json:"object"`
	Field  string `json:"field"`
	From   *int64 `json:"from,omitempty"`
	To     int64  `json:"to"`
	// Note is set when the firing would not commit (already at or above the target).
	Note string `json:"note,omitempty"`
}

type planStage struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Detail  string  `json:"detail"`
}

type planFiring struct {
	Peak     string `json:"peak"`
	TimeZone string `json:"timeZone"`
	FireTime string `json:"fireTime"`
	Start    string `json:"start"`
	End      string `json:"end"`
	Lead     struct {
		TotalSeconds     float64     `json:"totalSeconds"`
		ArgoSyncSeconds  float64     `json:"argoSyncDelaySeconds"`
		ColdStartSeconds float64     `json:"coldStartSeconds"`
		ColdStartStages  []planStage `json:"coldStartStages"`
		MarginSeconds    float64     `json:"marginSeconds"`
	} `json:"leadTime"`
	Change planChange `json:"change"`
}

type planOptions struct {
	env, repo, revision, output, now string
	count                            int
}

func newSchedulePlanCommand() *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan --env ENV [--repo DIR] [--count N] [-o text|json]",
		Short: "Print the next firings with the lead-time breakdown and the change each would commit",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.env, "env", "", "environment (reads clusters/<env>/schedule.yaml)")
	f.StringVar(&o.repo, "repo", ".", "repository: a directory or a URL (file://, https://, ssh://)")
	f.StringVar(&o.revision, "revision", "", "Git revision to read (default HEAD)")
	f.IntVar(&o.count, "count", 10, "number of firings")
	f.StringVar(&o.now, "now", "", "plan from this time (RFC 3339) instead of now")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func (o *planOptions) run(_ context.Context, w io.Writer) error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	if o.env == "" {
		return usageErr("--env is required")
	}
	if o.count < 1 {
		return usageErr("--count must be positive")
	}
	now := time.Now()
	if o.now != "" {
		t, err := time.Parse(time.RFC3339, o.now)
		if err != nil {
			return usageErr("--now: %v", err)
		}
		now = t
	}
	repo, err := gitOpts.open(context.Background(), o.repo)
	if err != nil {
		return err
	}
	snap, err := repo.Snapshot(o.revision)
	if err != nil {
		return err
	}
	s, err := schedule.Load(snap, o.env)
	if err != nil {
		return scheduleErr(err)
	}
	var out []planFiring
	for _, f := range s.Plan(now, o.count) {
		out = append(out, describe(f, snap))
	}
	if o.output == "json" {
		if out == nil {
			out = []planFiring{}
		}
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "%s at %s: lead time %s\n", schedule.Path(o.env), shortRev(snap.Revision), s.Lead)
	if len(out) == 0 {
		_, err := fmt.Fprintln(w, "no firings")
		return err
	}
	for _, f := range out {
		fmt.Fprintf(w, "\n%s  %s\n", f.FireTime, f.Peak)
		fmt.Fprintf(w, "  peak      %s → %s (%s)\n", f.Start, f.End, f.TimeZone)
		fmt.Fprintf(w, "  lead      %gs = argo sync %gs + cold start %gs + margin %gs\n",
			f.Lead.TotalSeconds, f.Lead.ArgoSyncSeconds, f.Lead.ColdStartSeconds, f.Lead.MarginSeconds)
		for _, st := range f.Lead.ColdStartStages {
			fmt.Fprintf(w, "            %-18s %gs (%s)\n", st.Name, st.Seconds, st.Detail)
		}
		c := f.Change
		from := "?"
		if c.From != nil {
			from = fmt.Sprint(*c.From)
		}
		fmt.Fprintf(w, "  change    %s %s %s: %s → %d", c.File, c.Object, c.Field, from, c.To)
		if c.Note != "" {
			fmt.Fprintf(w, " (%s)", c.Note)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// describe is a firing with the change it would commit on snap.
func describe(f schedule.Firing, snap *gitrepo.Snapshot) planFiring {
	p := f.Peak
	var pf planFiring
	pf.Peak, pf.TimeZone = p.Name, p.TimeZone
	pf.FireTime = f.FireTime.In(p.Location).Format(time.RFC3339)
	pf.Start = f.Start.In(p.Location).Format(time.RFC3339)
	pf.End = f.End.In(p.Location).Format(time.RFC3339)
	pf.Lead.TotalSeconds = seconds(f.Lead.Total)
	pf.Lead.ArgoSyncSeconds = seconds(f.Lead.ArgoSyncDelay)
	pf.Lead.ColdStartSeconds = seconds(f.Lead.ColdStart.Total)
	pf.Lead.MarginSeconds = seconds(f.Lead.Margin)
	for _, st := range f.Lead.ColdStart.Stages {
		pf.Lead.ColdStartStages = append(pf.Lead.ColdStartStages, planStage{st.Name, seconds(st.Duration), st.Detail})
	}
	pf.Change = planChange{File: p.Target.Path, Object: p.Target.Kind + "/" + p.Target.Name, Field: p.Target.Field, To: p.Warm}
	if v, err := schedule.CurrentValue(snap.Files, p.Target); err == nil {
		pf.Change.From = &v
		if v >= p.Warm {
			pf.Change.Note = "no commit: already at or above the target"
		}
	}
	return pf
}

type fireOptions struct {
	env, peak, repo, at, author, branch string
	scaleDown                           bool
}

func newScheduleFireCommand() *cobra.Command {
	o := &fireOptions{}
	cmd := &cobra.Command{
		Use:   "fire --env ENV --peak NAME [--repo URL] [--at RFC3339] [--author 'Name <email>']",
		Short: "Fire one peak's scale-up (or --scale-down) by hand: commit and push it",
		Long: `fire commits the scale-up of one occurrence of a peak and pushes it, exactly once: a firing
already in the history (trailers Schedule-Id and Fire-Time) is not committed again.

--at is the occurrence's fire time (peak start − lead time); by default the occurrence in
progress, else the next one. --repo is the repository to push to; a directory is pushed to
through file://.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.env, "env", "", "environment (reads clusters/<env>/schedule.yaml)")
	f.StringVar(&o.peak, "peak", "", "peak name")
	f.StringVar(&o.repo, "repo", ".", "repository URL to push to (file://, https://, ssh://) or a directory")
	f.StringVar(&o.at, "at", "", "fire time of the occurrence (RFC 3339)")
	f.StringVar(&o.author, "author", "Schedule Bot <schedule@llm-gitops.invalid>", "commit author, 'Name <email>'")
	f.StringVar(&o.branch, "branch", "main", "branch to commit to")
	f.BoolVar(&o.scaleDown, "scale-down", false, "undo the occurrence's scale-up instead")
	return cmd
}

func (o *fireOptions) run(ctx context.Context, w io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.env == "" || o.peak == "" {
		return usageErr("--env and --peak are required")
	}
	addr, err := mail.ParseAddress(o.author)
	if err != nil || addr.Name == "" {
		return usageErr("--author %q: want 'Name <email>'", o.author)
	}
	remote, err := gitOpts.remote(o.repo)
	if err != nil {
		return usageErr("--repo: %v", err)
	}
	repo, err := remote.Open(ctx)
	if err != nil {
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
	p := s.Peak(o.peak)
	if p == nil {
		var names []string
		for _, q := range s.Peaks {
			names = append(names, q.Name)
		}
		return usageErr("no peak %q in %s (peaks: %s)", o.peak, schedule.Path(o.env), strings.Join(names, ", "))
	}
	var fireTime time.Time
	if o.at != "" {
		if fireTime, err = time.Parse(time.RFC3339, o.at); err != nil {
			return usageErr("--at: %v", err)
		}
	} else {
		f, ok := s.Current(p, time.Now())
		if !ok {
			return usageErr("peak %s has no current or future occurrence: give --at", p.Name)
		}
		fireTime = f.FireTime
	}
	opts := schedule.FireOptions{Branch: o.branch, Author: gitrepo.Person{Name: addr.Name, Email: addr.Address}}
	var res *schedule.Result
	if o.scaleDown {
		res, err = s.ScaleDown(ctx, remote, p.Name, fireTime, opts)
	} else {
		res, err = s.Fire(ctx, remote, p.Name, fireTime, opts)
	}
	if res != nil {
		f := res.Firing
		fmt.Fprintf(w, "%s %s: fire time %s, peak %s → %s\n", res.Phase, p.Name,
			f.FireTime.In(p.Location).Format(time.RFC3339), f.Start.In(p.Location).Format(time.RFC3339), f.End.In(p.Location).Format(time.RFC3339))
		fmt.Fprintf(w, "  lead    %s\n", f.Lead)
		switch {
		case res.NoChange:
			fmt.Fprintf(w, "  no commit: %s\n", res.Reason)
		case res.Commit != "":
			fmt.Fprintf(w, "  change  %s: %d → %d (line %d)\n  commit  %s pushed to %s/%s after %d attempt(s)\n",
				p.Target, res.From, res.To, res.Line, res.Commit, remote.URL(), o.branch, res.Attempts)
		}
	}
	return scheduleErr(err)
}
