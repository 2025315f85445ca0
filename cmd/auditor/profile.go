package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/cost"
	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// profileOptions are the flags of `auditor profile`.
type profileOptions struct {
	src                 sourceFlags
	env, model, deploy  string
	prom, output        string
	window, rateWindow  time.Duration
	at                  time.Time
	timeZone            string
	utilization         float64
	replicaThroughput   float64
	ttft                time.Duration
	write               bool
	stderr              io.Writer
	prometheusTransport http.RoundTripper // tests may set it
}

func newProfileCommand() *cobra.Command {
	o := &profileOptions{}
	cmd := &cobra.Command{
		Use:   "profile --env ENV --model NAME --prometheus URL [--window 28d] [--write]",
		Short: "Measure a model's traffic from Prometheus and propose its KEDA threshold, minimums and missing peaks",
		Long: `profile reads a model's traffic from vLLM's own series in Prometheus over a window (default four
weeks): requests a second in each hour, queue depth, prompt and response lengths (p50, p95), time to
first token, and one replica's throughput where it saturated (requests were waiting on it).

From that it proposes, each with its arithmetic:
  - the ScaledObject's queue-depth threshold: a full queue's wait for a slot fits in the TTFT
    target (--ttft) less the measured TTFT p50, once the replicas KEDA asks for are up;
  - the minimum replicas of each hour of the week (never under the warm minimum in business
    hours, never under one);
  - the peaks the schedule is missing: weekly ones as a cron rule, others by day of the month,
    each with its warm count and the schedule's lead time;
  - the GPU cost a week at the minimums, and per 1,000 generated tokens.

It prints a diff to review: the profile file (clusters/<env>/profiles/<model>.yaml), the proposed
threshold as a JSON patch of the ScaledObject in the env's overlay (profile-<model>.yaml, listed
under patches:), and the schedule's new peaks; --write writes them to the work tree of --repo (a
directory). The minimums by hour and --max-num-seqs are printed only. The p95 lengths of
the profile file size --max-num-seqs in auditor check (rule vllm-max-num-seqs).

Exit codes: 0 done, 2 error.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	addEnvFlag(cmd, &o.env, "env", "environment (overlays/<env>, clusters/<env>/schedule.yaml)")
	f.StringVar(&o.model, "model", "", "vLLM's model_name (the Deployment's platform.llm/model annotation)")
	f.StringVar(&o.deploy, "deployment", "", "the Deployment, when several with a ScaledObject serve the model")
	f.StringVar(&o.prom, "prometheus", "", "Prometheus base URL, e.g. http://prometheus-operated.llm-monitoring.svc:9090")
	f.DurationVar(&o.window, "window", 28*24*time.Hour, "how far back to read")
	f.DurationVar(&o.rateWindow, "rate-window", 5*time.Minute, "rate() range for a replica's throughput (at least two scrape intervals)")
	addZonedAtFlag(cmd, &o.at, "end the window at this time (whole hours)", "")
	f.StringVar(&o.timeZone, "time-zone", "", "time zone of the hours (default: the schedule's first peak's, else UTC)")
	f.Float64Var(&o.utilization, "utilization", 0.8, "share of a replica's saturated throughput to plan for")
	f.Float64Var(&o.replicaThroughput, "replica-throughput", 0, "requests a second one replica finishes at saturation, when no replica saturated in the window (e.g. from a load test)")
	f.DurationVar(&o.ttft, "ttft", 2500*time.Millisecond, "longest wait for a first token in the queue (the TTFT SLO)")
	f.BoolVar(&o.write, "write", false, "write the profile file and the new peaks into the work tree")
	addReportOutput(cmd, &o.output)
	o.src.add(cmd)
	return cmd
}

// Complete takes the command's stderr.
func (o *profileOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.stderr = cmd.ErrOrStderr()
	return nil
}

// Validate rejects missing flags and values out of range.
func (o *profileOptions) Validate() error {
	switch {
	case o.env == "":
		return usageErr("--env is required")
	case o.model == "":
		return usageErr("--model is required")
	case o.prom == "":
		return usageErr("--prometheus is required")
	case o.window < 7*24*time.Hour:
		return usageErr("--window must be at least a week (168h): every hour of the week needs a sample")
	case o.replicaThroughput < 0:
		return usageErr("--replica-throughput must not be negative")
	case o.utilization <= 0 || o.utilization > 1:
		return usageErr("--utilization must be in (0, 1]")
	case o.ttft <= 0:
		return usageErr("--ttft must be positive")
	case o.write && (o.src.revision != "" || gitrepo.IsURL(o.src.repo)):
		return usageErr("--write needs --repo to be a directory read at its work tree (no --revision)")
	}
	return nil
}

// profileReport is the -o json/yaml output.
type profileReport struct {
	Profile  *profile.Profile  `json:"profile"`
	Proposal *profile.Proposal `json:"proposal"`
	// MaxNumSeqs is the arithmetic of --max-num-seqs at the measured p95 lengths.
	MaxNumSeqs string `json:"maxNumSeqs,omitempty"`
	// Diff is the change to the work tree, as `git apply` takes it.
	Diff string `json:"diff"`
}

// Run measures, proposes and prints.
func (o *profileOptions) Run(ctx context.Context, w io.Writer) error {
	res, err := o.src.render(o.env)
	if err != nil {
		return err
	}
	src, err := o.src.open()
	if err != nil {
		return failed(err)
	}
	wl, err := profile.FindWorkload(res.Objects, o.model, o.deploy)
	if err != nil {
		return failed(err)
	}
	settings := wl.Settings()
	schedFile := schedule.Path(o.env)
	var schedData []byte
	if src.Has(schedFile) {
		if schedData, err = src.ReadFile(schedFile); err != nil {
			return failed(err)
		}
		if settings.Schedule, err = schedule.Parse(schedFile, schedData); err != nil {
			return scheduleErr(err)
		}
	}
	settings.Path = scalingPath(settings, o.env, src.Has)
	loc, err := o.location(settings.Schedule)
	if err != nil {
		return failed(err)
	}
	settings.GPUsPerReplica, settings.Card = cost.PodGPUs(wl.Deployment)
	prices := &cost.Prices{}
	for _, obj := range res.Objects {
		prices.AddRules(obj)
	}
	settings.PricePerGPUHour, _ = prices.Price(settings.Card)

	client, err := api.NewClient(api.Config{Address: o.prom, Client: &http.Client{Timeout: 60 * time.Second, Transport: o.prometheusTransport}})
	if err != nil {
		return failed(fmt.Errorf("prometheus %s: %w", o.prom, err))
	}
	end := orNow(o.at)
	p, err := profile.Measure(ctx, promv1.NewAPI(client), profile.Source{
		Model: o.model, Service: wl.Deployment.GetName(), From: end.Add(-o.window), To: end, Location: loc, RateWindow: o.rateWindow,
	})
	if err != nil {
		return failed(err)
	}
	p.Plan = profile.Plan{Utilization: o.utilization, TTFTSeconds: o.ttft.Seconds()}
	switch {
	case p.Replica.Samples == 0 && o.replicaThroughput > 0:
		p.Replica.RequestsPerSecond, p.Replica.Stated = o.replicaThroughput, true
	case o.replicaThroughput > 0:
		fmt.Fprintf(o.stderr, "auditor: --replica-throughput ignored: replicas saturated in the window, and their throughput is measured (%s req/s)\n", fnum(p.Replica.RequestsPerSecond))
	}
	prop, err := profile.Propose(p, settings, p.Targets())
	if err != nil {
		return failed(err)
	}
	changes, err := o.changes(src.ReadFile, src.Has, p, prop, schedFile, schedData)
	if err != nil {
		return failed(err)
	}
	more, err := o.thresholdPatch(src.ReadFile, src.Has, p, prop, settings)
	changes = append(changes, more...)
	if err != nil {
		return failed(err)
	}
	var diff strings.Builder
	for _, c := range changes {
		d, err := adopt.FileDiff(c.path, c.before, c.after)
		if err != nil {
			return failed(err)
		}
		diff.WriteString(d)
	}
	if o.write {
		for _, c := range changes {
			full := filepath.Join(o.src.repo, filepath.FromSlash(c.path))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return failed(err)
			}
			if err := os.WriteFile(full, c.after, 0o644); err != nil {
				return failed(err)
			}
			fmt.Fprintf(o.stderr, "auditor: wrote %s\n", c.path)
		}
		if len(more) > 0 {
			if err := o.verifyThreshold(prop.Threshold.Proposed); err != nil {
				return failed(err)
			}
		}
	}
	seqs := maxNumSeqs(wl, p)
	return writeReport(w, o.output, profileReport{Profile: p, Proposal: prop, MaxNumSeqs: seqs, Diff: diff.String()}, func() error {
		writeProfile(w, p, prop, settings, loc)
		if seqs != "" {
			fmt.Fprintf(w, "\n--max-num-seqs at the measured p95 lengths (rule vllm-max-num-seqs of auditor check):\n  %s\n", seqs)
		}
		if diff.Len() > 0 {
			what := "to write with --write"
			if o.write {
				what = "written to the work tree"
			}
			fmt.Fprintf(w, "\nChanges (%s):\n%s", what, diff.String())
		}
		return nil
	})
}

// location is the profile's time zone: --time-zone, else the schedule's first peak's, else UTC.
func (o *profileOptions) location(s *schedule.Schedule) (*time.Location, error) {
	if o.timeZone != "" {
		loc, err := time.LoadLocation(o.timeZone)
		if err != nil {
			return nil, usageErr("--time-zone: %v", err)
		}
		return loc, nil
	}
	if s != nil && len(s.Peaks) > 0 {
		return s.Peaks[0].Location, nil
	}
	return time.UTC, nil
}

// scalingPath is the file that sets the ScaledObject's minimum for the env: the one a schedule
// peak of it already raises, else overlays/<env>/scaling.yaml when there is one, else the base.
func scalingPath(s profile.Settings, env string, has func(string) bool) string {
	if s.Schedule != nil {
		_, name, _ := strings.Cut(s.ScaledObject, "/")
		for _, p := range s.Schedule.Peaks {
			if p.Target.Kind == "ScaledObject" && p.Target.Name == name {
				return p.Target.Path
			}
		}
	}
	if p := "overlays/" + env + "/scaling.yaml"; has(p) {
		return p
	}
	return "overlays/" + env + "/kustomization.yaml"
}

type fileChange struct {
	path          string
	before, after []byte
}

// changes are the profile file and, when peaks are missing, the schedule with them appended.
func (o *profileOptions) changes(read func(string) ([]byte, error), has func(string) bool, p *profile.Profile, prop *profile.Proposal, schedFile string, schedData []byte) ([]fileChange, error) {
	var out []fileChange
	file := profile.Path(o.env, o.model)
	data, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	var before []byte
	if has(file) {
		if before, err = read(file); err != nil {
			return nil, err
		}
	}
	out = append(out, fileChange{file, before, data})
	var add []string
	for _, pk := range prop.Peaks {
		if pk.Action == profile.Add {
			add = append(add, pk.Entry)
		}
	}
	if len(add) == 0 {
		return out, nil
	}
	after := append([]byte(nil), schedData...)
	if len(after) == 0 {
		after = []byte("# Scheduled pre-peak scale-ups (read by `auditor schedule`, never synced by Argo CD).\npeaks:\n")
	} else if after[len(after)-1] != '\n' {
		after = append(after, '\n')
	}
	after = append(after, "\n"+strings.Join(add, "\n")...)
	if _, err := schedule.Parse(schedFile, after); err != nil {
		return nil, errors.Join(errors.New("the proposed peaks do not make a valid schedule"), err)
	}
	return append(out, fileChange{schedFile, schedData, after}), nil
}

func writeProfile(w io.Writer, p *profile.Profile, prop *profile.Proposal, s profile.Settings, loc *time.Location) {
	fmt.Fprintf(w, "Profile of %s (Service %s), %s to %s, %s (%d hours)\n", p.Model, p.Service,
		p.From.In(loc).Format("2006-01-02 15:04"), p.To.In(loc).Format("2006-01-02 15:04"), loc, len(p.Hourly))
	busiest := 0
	for i, r := range p.Hourly {
		if r > p.Hourly[busiest] {
			busiest = i
		}
	}
	fmt.Fprintf(w, "  busiest hour: %s req/s, %s\n", fnum(p.Hourly[busiest]), p.From.In(loc).Add(time.Duration(busiest)*time.Hour).Format("Mon 2006-01-02 15:04"))
	fmt.Fprintf(w, "  prompt tokens p50 %s, p95 %s; response tokens p50 %s, p95 %s\n",
		fnum(p.Tokens.Prompt.P50), fnum(p.Tokens.Prompt.P95), fnum(p.Tokens.Response.P50), fnum(p.Tokens.Response.P95))
	fmt.Fprintf(w, "  time to first token p50 %s s, p95 %s s\n", fnum(p.TTFT.P50), fnum(p.TTFT.P95))
	if p.Replica.Samples > 0 {
		fmt.Fprintf(w, "  one replica at saturation: %s req/s, %s generated tokens/s (median of %d pod samples with a queue)\n",
			fnum(p.Replica.RequestsPerSecond), fnum(p.Replica.TokensPerSecond), p.Replica.Samples)
	}
	if prop.PerReplica == 0 {
		for _, n := range prop.Notes {
			fmt.Fprintf(w, "NOTE %s\n", n)
		}
		return
	}
	fmt.Fprintf(w, "\nQueue threshold of ScaledObject %s: %s -> %s\n  %s\n", s.ScaledObject, fnum(prop.Threshold.Now), fnum(prop.Threshold.Proposed), prop.Threshold.Arithmetic)
	fmt.Fprintf(w, "\nMinimum replicas by hour (%s; warm minimum %d in business hours):\n", loc, s.WarmMinimum)
	for _, d := range prop.Minimums {
		var parts []string
		for _, r := range d.Ranges {
			parts = append(parts, fmt.Sprintf("%02d-%02d: %d", r.From, r.To, r.Replicas))
		}
		fmt.Fprintf(w, "  %s  %s\n", d.Day, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w, "\nPeaks:")
	if len(prop.Peaks) == 0 {
		fmt.Fprintln(w, "  none above the warm minimum")
	}
	for _, pk := range prop.Peaks {
		when := pk.When()
		if pk.Kind == profile.Monthly {
			when += " (seen " + strings.Join(pk.Seen, ", ") + ")"
		}
		verdict := "MISSING from the schedule: added below"
		switch pk.Action {
		case profile.Covered:
			verdict = "covered by schedule peak " + pk.CoveredBy
		case profile.Raise:
			verdict = fmt.Sprintf("schedule peak %s holds it with too few replicas: raise its warm to %d", pk.CoveredBy, pk.Warm)
		}
		warm := fmt.Sprint(pk.Warm)
		if pk.LowerBound {
			warm = "at least " + warm
		}
		fmt.Fprintf(w, "  %s: %s at %s for %s, warm %s\n    %s\n    %s\n", pk.Name, when, pk.At, pk.Duration, warm, pk.Arithmetic, verdict)
		if len(pk.Overlaps) > 0 {
			fmt.Fprintf(w, "    overlaps %s on the same field: the schedule composes them (a scale-down restores what the others leave)\n", strings.Join(pk.Overlaps, ", "))
		}
	}
	if prop.Lead != "" {
		fmt.Fprintf(w, "  lead time: %s\n", prop.Lead)
	}
	if c := prop.Cost; c != nil {
		fmt.Fprintf(w, "\nCost (%s):\n  %s\n  %s\n", c.Basis, c.Now, c.Proposed)
	}
	for _, n := range prop.Notes {
		fmt.Fprintf(w, "NOTE %s\n", n)
	}
}

func fnum(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// maxNumSeqs sizes the Deployment's --max-num-seqs at the profile's p95 lengths, as auditor
// check does once the profile is in Git; "" when the Deployment lacks the model facts.
func maxNumSeqs(wl profile.Workload, p *profile.Profile) string {
	cfg := check.SeqsConfigOf(wl.Deployment)
	cfg.Traffic = capacity.Traffic{PromptTokens: int64(math.Ceil(p.Tokens.Prompt.P95)), ResponseTokens: int64(math.Ceil(p.Tokens.Response.P95))}
	fit, err := capacity.SizeMaxNumSeqs(cfg)
	if err != nil {
		return ""
	}
	return fit.Explanation
}

// thresholdPatchFile is the overlay file that holds a ScaledObject's threshold from a profile: one
// per ScaledObject, so that two of one model never share a patch and its target.
func thresholdPatchFile(scaledObject string) string { return "profile-" + scaledObject + ".yaml" }

// thresholdPatch writes the proposed queue threshold into the env's overlay as a JSON patch
// (overlays/<env>/profile-<ScaledObject>.yaml, listed under patches: with its target): the threshold
// sits in a list of the ScaledObject, which a strategic-merge patch of a custom resource cannot
// reach. A test of the trigger's name guards its index. No change when they agree.
func (o *profileOptions) thresholdPatch(read func(string) ([]byte, error), has func(string) bool, p *profile.Profile, prop *profile.Proposal, s profile.Settings) ([]fileChange, error) {
	if prop.PerReplica == 0 || s.Threshold == 0 || prop.Threshold.Proposed == s.Threshold {
		return nil, nil
	}
	ns, name, _ := strings.Cut(s.ScaledObject, "/")
	at := fmt.Sprintf("/spec/triggers/%d", s.Trigger)
	guard := adopt.Op{Op: "test", Path: at + "/name", Value: s.TriggerName}
	if s.TriggerName == "" { // a trigger's name is optional: its query tells it then
		guard = adopt.Op{Op: "test", Path: at + "/metadata/query", Value: s.TriggerQuery}
	}
	ops := []adopt.Op{guard, {Op: "replace", Path: at + "/metadata/threshold", Value: strconv.FormatFloat(prop.Threshold.Proposed, 'f', -1, 64)}}
	head := []string{
		fmt.Sprintf("The queue threshold of ScaledObject %s from the traffic profile %s (auditor profile):", s.ScaledObject, profile.Path(o.env, p.Model)),
		prop.Threshold.Arithmetic + ".",
	}
	a, err := adopt.JSONPatch("overlays/"+o.env, func(name string) ([]byte, error) {
		if !has(name) {
			return nil, fs.ErrNotExist
		}
		return read(name)
	}, thresholdPatchFile(name), adopt.Target{Kind: "ScaledObject", Name: name, Namespace: ns}, head, ops)
	if err != nil {
		return nil, err
	}
	var out []fileChange
	for _, path := range slices.Sorted(maps.Keys(a.Files)) {
		var before []byte
		if has(path) {
			if before, err = read(path); err != nil {
				return nil, err
			}
		}
		out = append(out, fileChange{path, before, a.Files[path]})
	}
	return out, nil
}

// verifyThreshold renders the env from the work tree again and checks that the ScaledObject now
// has the proposed threshold: kustomize skips a patch whose target matches nothing, silently.
func (o *profileOptions) verifyThreshold(want float64) error {
	res, err := o.src.render(o.env)
	if err != nil {
		return fmt.Errorf("render after writing the threshold patch: %w", err)
	}
	wl, err := profile.FindWorkload(res.Objects, o.model, o.deploy)
	if err != nil {
		return err
	}
	if got := wl.Settings().Threshold; got != want {
		return fmt.Errorf("wrote the threshold patch, but overlays/%s renders ScaledObject %s/%s with threshold %s, not %s: does another patch or transformer of the overlay set it after?",
			o.env, wl.ScaledObject.GetNamespace(), wl.ScaledObject.GetName(), fnum(got), fnum(want))
	}
	return nil
}
