package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// ledgerAtOptions are the flags of `auditor ledger at`.
type ledgerAtOptions struct {
	ledgerQuery
	time time.Time // --at; zero is now
}

func newLedgerAtCommand() *cobra.Command {
	o := &ledgerAtOptions{}
	cmd := &cobra.Command{
		Use:   "at --env ENV --at T [--repo DIR|URL] [-o text|json|yaml]",
		Short: "What served in an environment at a time, and at what traffic shares",
		Long: `at replays the ledger up to the last record committed at or before --at and prints the
served model versions then: deployment, version, weights, share of the model's traffic, warm
minimum replicas.`,
		Example: `  auditor ledger at --env prod --at 2025-03-01T12:00:00Z`,
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
	o.add(cmd, "environment")
	addAtFlag(cmd, &o.time, "point in time", "time")
	return cmd
}

// Complete has nothing to fill.
func (o *ledgerAtOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate rejects a missing --env.
func (o *ledgerAtOptions) Validate() error {
	if o.env == "" {
		return usageErr("--env is required")
	}
	return nil
}

// Run prints what served in the env at the time.
func (o *ledgerAtOptions) Run(_ context.Context, w io.Writer) error {
	recs, err := o.records()
	if err != nil {
		return err
	}
	served := ledger.At(recs, o.env, orNow(o.time))
	if o.output != "text" {
		return writeReport(w, o.output, served, nil)
	}
	rev := "no record at or before that time"
	if served.Revision != "" {
		rev = "revision " + gitrepo.Short(served.Revision)
	}
	fmt.Fprintf(w, "%s at %s (%s)\n", o.env, served.At.UTC().Format(time.RFC3339), rev)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tDEPLOYMENT\tVERSION\tSHARE\tREPLICAS\tWEIGHTS\tIMAGE")
	for _, m := range served.Models {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%%\t%d\t%s@%s\t%s\n", m.Model, m.Deployment, m.Version, pct(m.SharePercent),
			m.Replicas, m.WeightsURI, gitrepo.Short(m.WeightsRevision), m.Image)
	}
	return tw.Flush()
}
