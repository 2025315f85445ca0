package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/platform/cost"
	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

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
	settings.PricePerGPUHour = pricePerGPUHour(res.Objects, settings.Card)

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
	o.stateThroughput(p)
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
	if err := writeDiffs(&diff, changes); err != nil {
		return failed(err)
	}
	if o.write {
		if err := o.writeFiles(changes); err != nil {
			return failed(err)
		}
		if len(more) > 0 {
			if err := o.verifyThreshold(prop.Threshold.Proposed); err != nil {
				return failed(err)
			}
		}
	}
	seqs := maxNumSeqs(wl, p)
	return writeReport(w, o.output, profileReport{Profile: p, Proposal: prop, MaxNumSeqs: seqs, Diff: diff.String()}, func() error {
		return o.writeProfileText(w, p, prop, settings, loc, seqs, &diff)
	})
}

// writeProfileText writes the profile p and its proposal prop as text, with the --max-num-seqs
// seqs says and the changes in diff.
func (o *profileOptions) writeProfileText(w io.Writer, p *profile.Profile, prop *profile.Proposal, settings profile.Settings, loc *time.Location, seqs string, diff *strings.Builder) error {
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
}

// pricePerGPUHour is the price of a GPU hour of card by the pricing rules among objs.
func pricePerGPUHour(objs []*unstructured.Unstructured, card string) float64 {
	prices := &cost.Prices{}
	for _, obj := range objs {
		prices.AddRules(obj)
	}
	price, _ := prices.Price(card)
	return price
}

// stateThroughput takes --replica-throughput as a replica's throughput when no replica
// saturated in p's window, and says it is ignored when one did.
func (o *profileOptions) stateThroughput(p *profile.Profile) {
	switch {
	case p.Replica.Samples == 0 && o.replicaThroughput > 0:
		p.Replica.RequestsPerSecond, p.Replica.Stated = o.replicaThroughput, true
	case o.replicaThroughput > 0:
		fmt.Fprintf(o.stderr, "auditor: --replica-throughput ignored: replicas saturated in the window, and their throughput is measured (%s req/s)\n", fnum(p.Replica.RequestsPerSecond))
	}
}

// writeDiffs writes to diff the unified diff of each of changes.
func writeDiffs(diff *strings.Builder, changes []fileChange) error {
	for _, c := range changes {
		d, err := adopt.FileDiff(c.path, c.before, c.after)
		if err != nil {
			return err
		}
		diff.WriteString(d)
	}
	return nil
}

// writeFiles writes each of changes to the work tree, saying so.
func (o *profileOptions) writeFiles(changes []fileChange) error {
	for _, c := range changes {
		full := filepath.Join(o.src.repo, filepath.FromSlash(c.path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, c.after, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(o.stderr, "auditor: wrote %s\n", c.path)
	}
	return nil
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
