package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// printRecords prints records as a table, one a line, within the terminal's width, or 120
// columns when w is not a terminal.
func printRecords(w io.Writer, recs []ledger.Record) error {
	width := outputWidth(w)
	if width == defaultWidth && !isTerminal(w) {
		width = tableWidth
	}
	return recordTable(w, recs, false, width)
}

// printRecordsWide is printRecords with the revision, the namespace, the weights, the image, the
// author and when the revision was first seen synced, at any width.
func printRecordsWide(w io.Writer, recs []ledger.Record) error { return recordTable(w, recs, true, 0) }

// recordTable prints recs as a table. Unless wide, within width columns: the subject, last,
// clipped to what the other columns leave, or on a line of its own below its row when that is
// under minSubject (-o wide and -o json have it whole).
func recordTable(w io.Writer, recs []ledger.Record, wide bool, width int) error {
	header := []string{"ID", "COMMITTED", "ENV", "KIND", "MODEL", "DEPLOYMENT", "VERSION", "SHARE", "REPLICAS"}
	if wide {
		header = append(header, "REVISION", "NAMESPACE", "WEIGHTS", "IMAGE", "AUTHOR", "SYNCED")
	}
	rows := [][]string{header}
	var subjects []string
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
		row := []string{r.ID, r.CommittedAt.UTC().Format(time.RFC3339), r.Env, kind, r.Model, r.Deployment, r.Version,
			pct(r.SharePercent) + "%", strconv.Itoa(int(r.Replicas))}
		if wide {
			synced := "-"
			if r.SyncedAt != nil {
				synced = r.SyncedAt.UTC().Format(time.RFC3339)
			}
			row = append(row, gitrepo.Short(r.Revision), orNone(r.Namespace), clip(orNone(r.WeightsURI), cellWidth)+"@"+gitrepo.Short(r.WeightsRevision),
				clip(orNone(r.Image), cellWidth), clip(r.Author, cellWidth), synced)
		}
		rows = append(rows, row)
		subjects = append(subjects, subject)
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	room, used := subjectWidth, 0
	for _, n := range widths {
		used += n + 2
	}
	if !wide && width > 0 {
		room = min(room, width-used)
	}
	for i, row := range rows {
		var b strings.Builder
		for j, cell := range row {
			b.WriteString(cell + strings.Repeat(" ", widths[j]-len([]rune(cell))+2))
		}
		line := strings.TrimRight(b.String(), " ")
		subject := "SUBJECT" // last, and clipped: a commit subject can be hundreds of characters
		if i > 0 {
			subject = subjects[i-1]
		}
		switch {
		case room >= minSubject:
			line += strings.Repeat(" ", max(0, used-len([]rune(line)))) + clip(subject, room)
		case i > 0: // too little room beside the row: the subject below it
			line += "\n  └ " + clip(subject, max(minSubject, width-4))
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// The widest a ledger table's free-text cells get: -o json has them whole.
const (
	subjectWidth = 50
	cellWidth    = 40
	minSubject   = 12
	// tableWidth is how wide a table printed to a pipe gets.
	tableWidth = 120
)

// clip shortens s to n characters, ending it with "…" when it was longer.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func pct(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
