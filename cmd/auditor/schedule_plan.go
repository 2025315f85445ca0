package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// planOptions are the flags of `auditor schedule plan`.
type planOptions struct {
	env, repo, revision, output string
	count                       int
	at                          time.Time // --at; zero is now
	stderr                      io.Writer // says what was read
}

func newSchedulePlanCommand() *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan --env ENV [--repo DIR] [--count N] [-o text|json|yaml]",
		Short: "Print the next firings with the lead-time breakdown and the change each would commit",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	f := cmd.Flags()
	addEnvFlag(cmd, &o.env, "env", "environment (reads clusters/<env>/schedule.yaml)")
	addRepoFlag(cmd, &o.repo, "repository: a directory or a URL (file://, https://, ssh://)")
	f.StringVar(&o.revision, "revision", "", "Git revision to read (default HEAD)")
	f.IntVar(&o.count, "count", 10, "number of firings")
	addZonedAtFlag(cmd, &o.at, "plan from this time", "now")
	addReportOutput(cmd, &o.output)
	return cmd
}

// Complete takes the command's stderr, which says what was read.
func (o *planOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.stderr = cmd.ErrOrStderr()
	return nil
}

// Validate rejects a missing --env, and a non-positive --count.
func (o *planOptions) Validate() error {
	if o.env == "" {
		return usageErr("--env is required")
	}
	if o.count < 1 {
		return usageErr("--count must be positive")
	}
	return nil
}

// Run prints the next firings of the env's schedule.
func (o *planOptions) Run(ctx context.Context, w io.Writer) error {
	repo, err := gitOpts.open(ctx, o.repo)
	if err != nil {
		return err
	}
	if err := checkRepoEnvs(repo, o.revision, o.env); err != nil {
		return err
	}
	snap, err := repo.Snapshot(o.revision)
	if err != nil {
		return err
	}
	if o.stderr != nil { // before the schedule is read: an error in it is an error at this commit
		fmt.Fprintf(o.stderr, "auditor: read %s from %s\n", schedule.Path(o.env), readAt(o.repo, o.revision, snap.Revision))
	}
	s, err := schedule.Load(snap, o.env)
	if err != nil {
		return scheduleErr(err)
	}
	out := []schedule.PlannedFiring{}
	for _, f := range s.Plan(orNow(o.at), o.count) {
		out = append(out, s.Describe(f, snap))
	}
	if o.output != "text" {
		return writeReport(w, o.output, out, nil)
	}
	fmt.Fprintf(w, "%s at %s: lead time %s\n", schedule.Path(o.env), gitrepo.Short(snap.Revision), s.Lead)
	if len(out) == 0 {
		_, err := fmt.Fprintln(w, "no firings")
		return err
	}
	for _, f := range out {
		writePlannedFiring(w, f)
	}
	return nil
}

func writePlannedFiring(w io.Writer, f schedule.PlannedFiring) {
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
