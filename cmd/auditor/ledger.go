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

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/ledger"
)

// newLedgerCommand groups the model ledger commands: list, at, show, rebuild, sync.
func newLedgerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger (list|at|show|rebuild|sync) [flags]",
		Short: "The model ledger: which model versions served where, at what traffic shares, since when",
		Long: `The model ledger records every change of a served model (a vLLM Deployment) in an environment:
added, changed (weights, share, image, replicas), retired, or rolled back by a revert commit.
It lives in Git as clusters/<env>/model-ledger.jsonl (never synced by Argo CD), appended by
commits of auditor-bot with a Synced-Revision trailer, and can be rebuilt from history alone.

Queries read the ledger at the repository's HEAD (main for a URL).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("unknown ledger command %q (want list, at, show, rebuild or sync)", args[0])
			}
			return nil
		},
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	cmd.AddCommand(newLedgerListCommand(), newLedgerAtCommand(), newLedgerShowCommand(),
		newLedgerRebuildCommand(), newLedgerSyncCommand())
	return cmd
}

// openLedgerRepo opens --repo (a directory or a URL).
func openLedgerRepo(location string) (*gitrepo.Repo, error) {
	repo, err := gitOpts.open(context.Background(), location)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return repo, nil
}

// readLedgers reads the ledger of env (every env with a ledger when empty) at HEAD.
func readLedgers(repo *gitrepo.Repo, env string) ([]ledger.Record, error) {
	envs := []string{env}
	if env == "" {
		var err error
		if envs, err = ledger.Envs(repo, ""); err != nil {
			return nil, &exitError{code: 2, err: err}
		}
	}
	var all []ledger.Record
	for _, e := range envs {
		recs, err := ledger.Read(repo, e, "")
		if err != nil {
			return nil, &exitError{code: 2, err: err}
		}
		all = append(all, recs...)
	}
	return all, nil
}

// remoteFor makes a writable remote of --repo (a URL as is, a directory as file://), with the
// root command's Git credentials.
func remoteFor(location string) (*gitrepo.Remote, error) {
	r, err := gitOpts.remote(location)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return r, nil
}

// loadRecords validates -o and reads the ledgers of env (all envs when empty) at the repo's HEAD.
func loadRecords(output, repoFlag, env string) ([]ledger.Record, error) {
	if err := checkOutputFormat(output); err != nil {
		return nil, err
	}
	repo, err := openLedgerRepo(repoFlag)
	if err != nil {
		return nil, err
	}
	return readLedgers(repo, env)
}

func newLedgerListCommand() *cobra.Command {
	var repoFlag, env, model, output string
	cmd := &cobra.Command{
		Use:   "list [--env ENV] [--model NAME] [--repo DIR|URL] [-o json]",
		Short: "List ledger records, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			recs, err := loadRecords(output, repoFlag, env)
			if err != nil {
				return err
			}
			recs = ledger.Filter(recs, "", model)
			if output == "json" {
				if recs == nil {
					recs = []ledger.Record{}
				}
				return writeJSON(cmd.OutOrStdout(), recs)
			}
			return printRecords(cmd.OutOrStdout(), recs)
		},
	}
	cmd.Flags().StringVar(&repoFlag, "repo", ".", "repository: a directory or a URL (file://, https://, ssh://)")
	cmd.Flags().StringVar(&env, "env", "", "environment (default: every environment with a ledger)")
	cmd.Flags().StringVar(&model, "model", "", "served model name, e.g. qwen")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printRecords(w io.Writer, recs []ledger.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCOMMITTED\tENV\tKIND\tMODEL\tDEPLOYMENT\tVERSION\tSHARE\tREPLICAS\tREVISION\tSUBJECT")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%%\t%d\t%s\t%s\n", r.ID, r.CommittedAt.UTC().Format(time.RFC3339),
			r.Env, kind, r.Model, r.Deployment, r.Version, pct(r.SharePercent), r.Replicas, gitrepo.Short(r.Revision), subject)
	}
	return tw.Flush()
}

func pct(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// parseTime accepts RFC 3339, "2006-01-02 15:04[:05]" and "2006-01-02" (UTC), or "now".
func parseTime(s string) (time.Time, error) {
	if s == "now" {
		return time.Now(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid time %q (want RFC 3339, e.g. 2025-03-01T12:00:00Z, or 2025-03-01 12:00)", s)
}

func newLedgerAtCommand() *cobra.Command {
	var repoFlag, env, at, output string
	cmd := &cobra.Command{
		Use:   "at --env ENV --time T [--repo DIR|URL] [-o json]",
		Short: "What served in an environment at a time, and at what traffic shares",
		Long: `at replays the ledger up to the last record committed at or before --time and prints the
served model versions then: deployment, version, weights, share of the model's traffic, warm
minimum replicas.`,
		Example: `  auditor ledger at --env prod --time 2025-03-01T12:00:00Z`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputFormat(output); err != nil {
				return err
			}
			if env == "" {
				return usageErr("--env is required")
			}
			t, err := parseTime(at)
			if err != nil {
				return usageErr("%v", err)
			}
			repo, err := openLedgerRepo(repoFlag)
			if err != nil {
				return err
			}
			recs, err := readLedgers(repo, env)
			if err != nil {
				return err
			}
			served := ledger.At(recs, env, t)
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), served)
			}
			w := cmd.OutOrStdout()
			rev := "no record at or before that time"
			if served.Revision != "" {
				rev = "revision " + gitrepo.Short(served.Revision)
			}
			fmt.Fprintf(w, "%s at %s (%s)\n", env, served.At.UTC().Format(time.RFC3339), rev)
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODEL\tDEPLOYMENT\tVERSION\tSHARE\tREPLICAS\tWEIGHTS\tIMAGE")
			for _, m := range served.Models {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s%%\t%d\t%s@%s\t%s\n", m.Model, m.Deployment, m.Version, pct(m.SharePercent),
					m.Replicas, m.WeightsURI, gitrepo.Short(m.WeightsRevision), m.Image)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&repoFlag, "repo", ".", "repository: a directory or a URL (file://, https://, ssh://)")
	cmd.Flags().StringVar(&env, "env", "", "environment")
	cmd.Flags().StringVar(&at, "time", "now", "point in time: RFC 3339, '2006-01-02 15:04' (UTC) or now")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func newLedgerShowCommand() *cobra.Command {
	var repoFlag, env, output string
	cmd := &cobra.Command{
		Use:   "show ID [--repo DIR|URL] [-o json]",
		Short: "Show one ledger record (a unique id prefix of 4+ characters works too)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("show takes exactly one record id")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, err := loadRecords(output, repoFlag, env)
			if err != nil {
				return err
			}
			r, ok := ledger.Find(recs, args[0])
			if !ok {
				return &exitError{code: 2, err: fmt.Errorf("no ledger record %q", args[0])}
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			return printRecord(cmd.OutOrStdout(), r)
		},
	}
	cmd.Flags().StringVar(&repoFlag, "repo", ".", "repository: a directory or a URL (file://, https://, ssh://)")
	cmd.Flags().StringVar(&env, "env", "", "environment (default: every environment with a ledger)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
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
	}
	return tw.Flush()
}

func newLedgerRebuildCommand() *cobra.Command {
	var repoFlag, env, branch string
	var dryRun, force bool
	cmd := &cobra.Command{
		Use:   "rebuild --env ENV [--repo DIR|URL] [--branch main] [--dry-run] [--force]",
		Short: "Rebuild an environment's ledger from the history of its manifests",
		Long: `rebuild walks the first-parent commits of the branch that touched overlays/<env>, base/ or
components/, renders each, and turns every change of the served models into a record; reverts
give rollback records. --dry-run prints the JSON Lines; otherwise the ledger file is replaced by
a commit of auditor-bot (syncedAt and metrics of records already there are kept). A malformed
existing ledger is only overwritten with --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env == "" {
				return usageErr("--env is required")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if dryRun {
				repo, err := openLedgerRepo(repoFlag)
				if err != nil {
					return err
				}
				rev := ""
				if gitrepo.IsURL(repoFlag) {
					rev = branch
				}
				recs, err := ledger.Records(ctx, repo, env, "", rev)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				data, err := ledger.Marshal(recs)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			remote, err := remoteFor(repoFlag)
			if err != nil {
				return err
			}
			repo, err := remote.Open(ctx)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			head, err := repo.Resolve(branch)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			recs, err := ledger.Records(ctx, repo, env, "", head)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			res, err := ledger.Replace(ctx, remote, env, branch, recs, head, force)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if res.NoChange {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ledger up to date (%d records)\n", ledger.Path(env), len(recs))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d records, commit %s\n", ledger.Path(env), len(recs), gitrepo.Short(res.Commit))
			return nil
		},
	}
	cmd.Flags().StringVar(&repoFlag, "repo", ".", "repository: a directory (bare, to write) or a URL")
	cmd.Flags().StringVar(&env, "env", "", "environment")
	cmd.Flags().StringVar(&branch, "branch", "main", "branch to read and write")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the rebuilt ledger instead of committing it")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite a malformed ledger")
	return cmd
}

func newLedgerSyncCommand() *cobra.Command {
	var repoFlag, env, branch, prom, window string
	cmd := &cobra.Command{
		Use:   "sync --env ENV [--repo DIR|URL] [--branch main] [--prometheus URL]",
		Short: "Append the records of the commits since the ledger's Synced-Revision",
		Long: `sync computes the records of the commits after the revision named by the last ledger commit's
Synced-Revision trailer up to the branch head and appends those not in the ledger yet. With
--prometheus, each new record of a serving version gets a metrics snapshot (e2e latency and TTFT
p50/p95, error rate = aborted / finished requests) from the Prometheus HTTP API.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env == "" {
				return usageErr("--env is required")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			remote, err := remoteFor(repoFlag)
			if err != nil {
				return err
			}
			req := ledger.SyncRequest{Env: env, Branch: branch}
			if prom != "" {
				req.Metrics = (&ledger.Prometheus{URL: prom, Window: window}).ForRecord
			}
			res, err := ledger.Sync(ctx, remote, req)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if res.Appended == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: up to date\n", ledger.Path(env))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d records appended, commit %s\n", ledger.Path(env), res.Appended, gitrepo.Short(res.Result.Commit))
			return nil
		},
	}
	cmd.Flags().StringVar(&repoFlag, "repo", ".", "repository: a directory (bare, to write) or a URL")
	cmd.Flags().StringVar(&env, "env", "", "environment")
	cmd.Flags().StringVar(&branch, "branch", "main", "branch to read and write")
	cmd.Flags().StringVar(&prom, "prometheus", "", "Prometheus base URL for metrics snapshots (none: no snapshot)")
	cmd.Flags().StringVar(&window, "window", "5m", "rate window of the metrics queries")
	return cmd
}
