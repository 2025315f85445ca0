package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/capacity"
)

// coldStartOptions are the flags of `auditor capacity coldstart`.
type coldStartOptions struct {
	node, loadTime, engineInit           time.Duration
	image, pull, weights, download, load string
	budget, probeDelay, probePeriod      time.Duration
	probeThreshold                       int32
	output                               string
	changed                              func(flag string) bool
}

func newCapacityColdStartCommand() *cobra.Command {
	def := capacity.DefaultColdStart()
	o := &coldStartOptions{}
	cmd := &cobra.Command{
		Use:   "coldstart [--node-provisioning D] [--image-size SIZE --pull-bandwidth RATE] [--weights-size SIZE --download-bandwidth RATE] [--load-bandwidth RATE | --load-time D] [--engine-init D] [--startup-probe-budget D]",
		Short: "How long a new vLLM replica takes to serve, stage by stage, against the startupProbe",
		Long: `coldstart adds up node provisioning, image pull (size / bandwidth), weights download
(size / bandwidth) and load into GPU (size / bandwidth, or --load-time, plus --engine-init).
The defaults are the platform's reference (docs/platform.md): 90 s + 80 s + 128 s + 38 s = 336 s.

With --startup-probe-budget (or --probe-initial-delay, --probe-period and
--probe-failure-threshold: budget = delay + threshold × period) it checks the probe: the
kubelet's clock starts with the container, so the budget must cover the weights download and
load; exit code 1 when it does not. Covering the whole cold start is reported as well.

Sizes: 10GB, 10Gi, 10GiB. Rates: 1Gbit/s, 10Gbps, 125MB/s, 2GB/s.`,
		Example: `  auditor capacity coldstart --node-provisioning 90s --image-size 10GB --pull-bandwidth 1Gbit/s \
      --weights-size 16GB --download-bandwidth 1Gbit/s --load-bandwidth 2GB/s --engine-init 30s --startup-probe-budget 420s
  auditor capacity coldstart --probe-initial-delay 60s --probe-period 10s --probe-failure-threshold 36 -o json`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.DurationVar(&o.node, "node-provisioning", def.NodeProvisioning, "time for a new GPU node to become schedulable (0 if one is free)")
	f.StringVar(&o.image, "image-size", "10GB", "container image size (0 if cached on the node)")
	f.StringVar(&o.pull, "pull-bandwidth", "1Gbit/s", "registry pull bandwidth")
	f.StringVar(&o.weights, "weights-size", "16GB", "model weights size")
	f.StringVar(&o.download, "download-bandwidth", "1Gbit/s", "weights download/read bandwidth from the model cache")
	f.StringVar(&o.load, "load-bandwidth", "2GB/s", "bandwidth of loading weights into GPU memory")
	f.DurationVar(&o.loadTime, "load-time", 0, "declared time to load weights into GPU memory, instead of --load-bandwidth")
	f.DurationVar(&o.engineInit, "engine-init", def.EngineInit, "engine start-up after loading: CUDA graphs, KV cache allocation")
	f.DurationVar(&o.budget, "startup-probe-budget", 0, "startupProbe budget to check (initialDelaySeconds + failureThreshold × periodSeconds)")
	f.DurationVar(&o.probeDelay, "probe-initial-delay", 0, "startupProbe initialDelaySeconds, to compute the budget")
	f.DurationVar(&o.probePeriod, "probe-period", 10*time.Second, "startupProbe periodSeconds, to compute the budget")
	f.Int32Var(&o.probeThreshold, "probe-failure-threshold", 0, "startupProbe failureThreshold, to compute the budget")
	addReportOutput(cmd, &o.output)
	return cmd
}

// Complete remembers which flags were given.
func (o *coldStartOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.changed = cmd.Flags().Changed
	return nil
}

// Validate rejects conflicting or non-positive probe flags, and computes the budget
// from the --probe-* flags.
func (o *coldStartOptions) Validate() error {
	if o.changed("load-bandwidth") && o.changed("load-time") {
		return usageErr("--load-bandwidth and --load-time are mutually exclusive")
	}
	probeFlags := o.changed("probe-initial-delay") || o.changed("probe-period") || o.changed("probe-failure-threshold")
	if probeFlags && o.changed("startup-probe-budget") {
		return usageErr("--startup-probe-budget and --probe-* are mutually exclusive")
	}
	if probeFlags {
		if o.probeThreshold <= 0 || o.probePeriod <= 0 || o.probeDelay < 0 {
			return usageErr("--probe-failure-threshold and --probe-period must be positive, --probe-initial-delay not negative")
		}
		o.budget = capacity.StartupProbeBudget(o.probeDelay, o.probePeriod, o.probeThreshold)
	}
	if o.changed("startup-probe-budget") && o.budget <= 0 {
		return usageErr("--startup-probe-budget must be positive")
	}
	return nil
}

// Run prints the cold start stage by stage; exit code 1 when the probe budget is too short.
func (o *coldStartOptions) Run(_ context.Context, w io.Writer) error {
	c, err := o.coldStart()
	if err != nil {
		return err
	}
	e, err := c.Estimate()
	if err != nil {
		return inputErr(err)
	}
	var probe *capacity.ProbeCheck
	if o.budget > 0 {
		p, err := capacity.CheckStartupProbe(o.budget, e)
		if err != nil {
			return inputErr(err)
		}
		probe = &p
	}
	err = writeReport(w, o.output, capacity.NewColdStartReport(e, probe), func() error {
		writeColdStart(w, e, probe)
		return nil
	})
	if err != nil {
		return err
	}
	if probe != nil && !probe.CoversInContainer {
		return found("startup probe budget too short")
	}
	return nil
}

// coldStart parses the sizes and rates of the flags.
func (o *coldStartOptions) coldStart() (capacity.ColdStart, error) {
	c := capacity.ColdStart{NodeProvisioning: o.node, LoadTime: o.loadTime, EngineInit: o.engineInit}
	var err error
	if c.ImageBytes, err = capacity.ParseBytes(o.image); err != nil {
		return c, usageErr("--image-size: %w", err)
	}
	if c.WeightsBytes, err = capacity.ParseBytes(o.weights); err != nil {
		return c, usageErr("--weights-size: %w", err)
	}
	for _, bw := range []struct {
		flag, v string
		dst     *float64
		needed  bool
	}{
		{"pull-bandwidth", o.pull, &c.PullBandwidth, c.ImageBytes > 0},
		{"download-bandwidth", o.download, &c.DownloadBandwidth, c.WeightsBytes > 0},
		{"load-bandwidth", o.load, &c.LoadBandwidth, !o.changed("load-time")},
	} {
		if !bw.needed {
			continue
		}
		if *bw.dst, err = capacity.ParseBandwidth(bw.v); err != nil {
			return c, usageErr("--%s: %w", bw.flag, err)
		}
	}
	return c, nil
}

func writeColdStart(w io.Writer, e capacity.ColdStartEstimate, probe *capacity.ProbeCheck) {
	fmt.Fprintf(w, "%-20s %7s  %s\n", "STAGE", "TIME", "DETAIL")
	for i, s := range e.Stages {
		where := ""
		if s.InContainer {
			where = " [in container]"
		}
		fmt.Fprintf(w, "%-20s %7s  %s%s\n", fmt.Sprintf("%d. %s", i+1, s.Name), fmt.Sprintf("%g s", s.Duration.Seconds()), s.Detail, where)
	}
	fmt.Fprintf(w, "%-20s %7s  %s; %g s after container start\n", "total", fmt.Sprintf("%g s", e.Total.Seconds()),
		e.Total.Round(time.Second), e.InContainer.Seconds())
	if probe != nil {
		fmt.Fprintln(w, probe.Explanation)
	}
}
