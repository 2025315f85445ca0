package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/capacity"
)

// hpaOptions are the flags of `auditor capacity hpa`.
type hpaOptions struct {
	current        int32
	metric, target float64
	hpa            capacity.HPA
	recent         []string
	output         string
	changed        func(flag string) bool
	history        []capacity.Recommendation // --recent, parsed
}

func newCapacityHPACommand() *cobra.Command {
	o := &hpaOptions{hpa: capacity.DefaultHPA()}
	cmd := &cobra.Command{
		Use:   "hpa --current N --metric VALUE --target VALUE [--min N] [--max N] [--recent AGE=REPLICAS]...",
		Short: "The replica count the HorizontalPodAutoscaler will set, step by step",
		Long: `hpa computes what the HorizontalPodAutoscaler does with one AverageValue metric (KEDA's
Prometheus triggers): desired = ceil(current × metric / target), where metric is the per-pod
value; no change while metric/target is within the tolerance (10 %) of 1; a scale-down goes
no lower than the highest recommendation of the scale-down window (300 s), a scale-up is
not stabilised; the result is clamped to [--min, --max].

--recent gives the controller's earlier recommendations, e.g. --recent 2m=8 for "8 replicas,
2 minutes ago".`,
		Example: `  auditor capacity hpa --current 4 --metric 30 --target 10
  auditor capacity hpa --current 12 --metric 2 --target 10 --recent 2m=8 --scale-down-window 600s -o json`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.Int32Var(&o.current, "current", 0, "current replicas")
	f.Float64Var(&o.metric, "metric", 0, "current metric value per pod (e.g. requests waiting per pod)")
	f.Float64Var(&o.target, "target", 0, "target value per pod (the trigger's threshold)")
	f.Int32Var(&o.hpa.MinReplicas, "min", o.hpa.MinReplicas, "minReplicas")
	f.Int32Var(&o.hpa.MaxReplicas, "max", 0, "maxReplicas (0: no upper bound)")
	f.Float64Var(&o.hpa.Tolerance, "tolerance", o.hpa.Tolerance, "tolerance around the target within which nothing changes")
	f.DurationVar(&o.hpa.ScaleDownWindow, "scale-down-window", o.hpa.ScaleDownWindow, "scale-down stabilisation window")
	f.DurationVar(&o.hpa.ScaleUpWindow, "scale-up-window", o.hpa.ScaleUpWindow, "scale-up stabilisation window")
	f.StringSliceVar(&o.recent, "recent", nil, "earlier recommendation AGE=REPLICAS, e.g. 2m=8 (repeatable)")
	addReportOutput(cmd, &o.output)
	return cmd
}

// Complete remembers which flags were given.
func (o *hpaOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.changed = cmd.Flags().Changed
	return nil
}

// Validate rejects a missing --current, --metric or --target and a malformed --recent.
func (o *hpaOptions) Validate() error {
	for _, req := range []string{"current", "metric", "target"} {
		if !o.changed(req) {
			return usageErr("--%s is required", req)
		}
	}
	o.history = nil
	for _, r := range o.recent {
		age, n, ok := strings.Cut(r, "=")
		d, err1 := time.ParseDuration(strings.TrimSpace(age))
		v, err2 := strconv.ParseInt(strings.TrimSpace(n), 10, 32)
		if !ok || err1 != nil || err2 != nil || d < 0 || v < 0 {
			return usageErr("--recent %q: want AGE=REPLICAS, e.g. 2m=8", r)
		}
		o.history = append(o.history, capacity.Recommendation{Age: d, Replicas: int32(v)})
	}
	return nil
}

// Run prints the decision step by step, and the rules it was taken under.
func (o *hpaOptions) Run(_ context.Context, w io.Writer) error {
	d, err := o.hpa.Desired(o.current, o.metric, o.target, o.history)
	if err != nil {
		return inputErr(err)
	}
	if o.output != "text" {
		return writeReport(w, o.output, capacity.NewHPAResult(o.hpa, d), nil)
	}
	fmt.Fprintf(w, "desired replicas: %d (current %d)\n", d.Desired, d.Current)
	for _, s := range d.Steps[:len(d.Steps)-1] { // the last step repeats the result
		fmt.Fprintf(w, "  %s\n", s)
	}
	h := o.hpa
	up := "none"
	if h.ScaleUpWindow > 0 {
		up = fmt.Sprintf("%g s (lowest recommendation in the window)", h.ScaleUpWindow.Seconds())
	}
	maxS := "unbounded"
	if h.MaxReplicas > 0 {
		maxS = strconv.Itoa(int(h.MaxReplicas))
	}
	fmt.Fprintf(w, "rules:\n")
	fmt.Fprintf(w, "  tolerance %g %%: no change while %g ≤ metric/target ≤ %g\n",
		h.Tolerance*100, 1-h.Tolerance, 1+h.Tolerance)
	fmt.Fprintf(w, "  stabilisation: scale-down %g s (highest recommendation in the window), scale-up %s\n",
		h.ScaleDownWindow.Seconds(), up)
	fmt.Fprintf(w, "  replicas clamped to [%d, %s]\n", h.MinReplicas, maxS)
	return nil
}
