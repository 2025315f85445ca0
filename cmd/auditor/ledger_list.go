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

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// ledgerListOptions are the flags of `auditor ledger list`.
type ledgerListOptions struct {
	ledgerQuery
	model string
}

func newLedgerListCommand() *cobra.Command {
	o := &ledgerListOptions{}
	cmd := &cobra.Command{
		Use:   "list [--env ENV] [--model NAME] [--repo DIR|URL] [-o text|wide|json|yaml]",
		Short: "List ledger records, oldest first",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	o.add(cmd, "environment (default: every environment with a ledger)")
	cmd.Flags().StringVar(&o.model, "model", "", "served model name, e.g. qwen")
	return cmd
}

// Complete has nothing to fill.
func (o *ledgerListOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate has nothing to check: -o is checked as it is parsed.
func (o *ledgerListOptions) Validate() error { return nil }

// Run prints the records of the env (all envs) and model, oldest first.
func (o *ledgerListOptions) Run(_ context.Context, w io.Writer) error {
	recs, err := o.records()
	if err != nil {
		return err
	}
	recs = ledger.Filter(recs, "", o.model)
	switch o.output {
	case "wide":
		return printRecordsWide(w, recs)
	case "text":
		return printRecords(w, recs)
	}
	if recs == nil {
		recs = []ledger.Record{}
	}
	return writeReport(w, o.output, recs, nil)
}

// printRecords prints records as a table, one a line.
func printRecords(w io.Writer, recs []ledger.Record) error { return recordTable(w, recs, false) }

// printRecordsWide is printRecords with the namespace, the weights, the image, the author and
// when the revision was first seen synced.
func printRecordsWide(w io.Writer, recs []ledger.Record) error { return recordTable(w, recs, true) }

func recordTable(w io.Writer, recs []ledger.Record, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "ID\tCOMMITTED\tENV\tKIND\tMODEL\tDEPLOYMENT\tVERSION\tSHARE\tREPLICAS\tREVISION"
	if wide {
		header += "\tNAMESPACE\tWEIGHTS\tIMAGE\tAUTHOR\tSYNCED"
	}
	header += "\tSUBJECT" // last, and clipped: a commit subject can be hundreds of characters
	fmt.Fprintln(tw, header)
	for _, r := range recs {
		kind := string(r.Kind)
		if r.Effect != "" {
			kind += "/" + string(r.Effect)
		}
		if len(r.Changes) > 0 {
			kind += " (" + strings.Join(r.Changes, ",") + ")"
		}
		subject := r.Subject
		if r.Reverts != "" {
			subject = "reverts " + gitrepo.Short(r.Reverts) + ": " + subject
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%%\t%d\t%s", r.ID, r.CommittedAt.UTC().Format(time.RFC3339),
			r.Env, kind, r.Model, r.Deployment, r.Version, pct(r.SharePercent), r.Replicas, gitrepo.Short(r.Revision))
		if wide {
			synced := "-"
			if r.SyncedAt != nil {
				synced = r.SyncedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "\t%s\t%s@%s\t%s\t%s\t%s", orNone(r.Namespace), clip(orNone(r.WeightsURI), cellWidth),
				gitrepo.Short(r.WeightsRevision), clip(orNone(r.Image), cellWidth), clip(r.Author, cellWidth), synced)
		}
		fmt.Fprintf(tw, "\t%s\n", clip(subject, subjectWidth))
	}
	return tw.Flush()
}

// The widest a ledger table's free-text cells get: -o json has them whole.
const (
	subjectWidth = 50
	cellWidth    = 40
)

// clip shortens s to n characters, ending it with "…" when it was longer.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func pct(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
