package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// ledgerShowOptions are the flags and argument of `auditor ledger show`.
type ledgerShowOptions struct {
	ledgerQuery
	id string
}

func newLedgerShowCommand() *cobra.Command {
	o := &ledgerShowOptions{}
	cmd := &cobra.Command{
		Use:   "show ID [--repo DIR|URL] [-o text|json|yaml]",
		Short: "Show one ledger record (a unique id prefix of 4+ characters works too)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("show takes exactly one record id")
			}
			return nil
		},
		RunE: runE(o),
	}
	o.add(cmd, "environment (default: every environment with a ledger)")
	return cmd
}

// Complete takes the record id from the arguments.
func (o *ledgerShowOptions) Complete(_ *cobra.Command, args []string) error {
	o.id = args[0]
	return nil
}

// Validate has nothing to check: -o is checked as it is parsed.
func (o *ledgerShowOptions) Validate() error { return nil }

// Run prints the record.
func (o *ledgerShowOptions) Run(_ context.Context, w io.Writer) error {
	recs, err := o.records()
	if err != nil {
		return err
	}
	r, ok := ledger.Find(recs, o.id)
	if !ok {
		return usageErr("no ledger record %q", o.id)
	}
	if o.output != "text" {
		return writeReport(w, o.output, r, nil)
	}
	return printRecord(w, r)
}

func printRecord(w io.Writer, r ledger.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", r.ID)
	row("kind", string(r.Kind))
	row("effect", string(r.Effect))
	row("changes", strings.Join(r.Changes, ", "))
	row("reverts", r.Reverts)
	row("env", r.Env)
	row("overlay", r.Overlay)
	row("model", r.Model)
	row("deployment", strings.TrimPrefix(r.Namespace+"/"+r.Deployment, "/"))
	row("version", r.Version)
	row("weights", r.WeightsURI+"@"+r.WeightsRevision)
	row("image", r.Image)
	row("share", pct(r.SharePercent)+" %")
	row("replicas", strconv.FormatInt(r.Replicas, 10)+" (warm minimum)")
	if r.GPUPriceUSDPerHour > 0 {
		row("GPU price", fmt.Sprintf("%d × %s at %s USD an hour a replica", r.GPUsPerReplica, r.Card, strconv.FormatFloat(r.GPUPriceUSDPerHour, 'f', -1, 64)))
	}
	row("revision", r.Revision)
	row("author", r.Author)
	row("subject", r.Subject)
	row("committed", r.CommittedAt.UTC().Format(time.RFC3339))
	if r.SyncedAt != nil {
		row("synced", r.SyncedAt.UTC().Format(time.RFC3339))
	}
	if m := r.Metrics; m != nil {
		f := func(p *float64, unit string) string {
			if p == nil {
				return "no data"
			}
			return strconv.FormatFloat(*p, 'g', 4, 64) + unit
		}
		row("metrics", fmt.Sprintf("at %s over %s: e2e p50 %s, p95 %s; TTFT p50 %s, p95 %s; error rate %s",
			m.At.UTC().Format(time.RFC3339), m.Window, f(m.E2EP50, " s"), f(m.E2EP95, " s"),
			f(m.TTFTP50, " s"), f(m.TTFTP95, " s"), f(m.ErrorRate, "")))
		if m.CostPer1kTokens != nil {
			row("cost", f(m.CostPer1kTokens, " USD per 1k tokens"))
		}
	}
	return tw.Flush()
}
