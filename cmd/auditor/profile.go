package main

import (
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/profile"
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
