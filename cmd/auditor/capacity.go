package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/capacity"
)

// newCapacityCommand groups the capacity calculators: KV cache, HPA decisions, cold start.
func newCapacityCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capacity (kv|hpa|coldstart) [flags]",
		Short: "LLM inference capacity arithmetic: KV cache fit, HPA decisions, cold start",
		Long: `capacity works the numbers of docs/platform.md: how much KV cache a model needs and how many
conversations fit on a card, what replica count the HorizontalPodAutoscaler will set, and how
long a cold start takes against the startupProbe budget.

Exit codes: 0 fine, 1 a check failed (KV cache does not fit, probe budget too short), 2 bad input.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{code: 2, err: fmt.Errorf("unknown capacity calculator %q (want kv, hpa or coldstart)", args[0])}
			}
			return nil
		},
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true, // as on the root: also when run on its own, e.g. in tests
		SilenceErrors: true,
	}
	// Sub-commands inherit this: malformed flag values and unknown flags are usage errors.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	cmd.AddCommand(newCapacityKVCommand(), newCapacityHPACommand(), newCapacityColdStartCommand())
	return cmd
}

// usageErr makes a bad-input error (exit code 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func checkOutputFormat(o string) error {
	if o != "text" && o != "json" {
		return usageErr("unknown output format %q (want text or json)", o)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// inputErr turns a capacity error into exit code 2 when it is bad input.
func inputErr(err error) error {
	if errors.Is(err, capacity.ErrInvalid) {
		return &exitError{code: 2, err: err}
	}
	return err
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// ---------------------------------------------------------------------------------------------
// kv

type kvOptions struct {
	model                          capacity.Model
	context                        int64
	freeMemory, gpuMemory, weights string
	utilization                    float64
	maxNumSeqs                     int64
	output                         string
}

type kvResult struct {
	Model                capacity.Model    `json:"model"`
	BytesPerToken        int64             `json:"bytesPerToken"`
	ContextTokens        int64             `json:"contextTokens"`
	ConversationBytes    int64             `json:"conversationBytes"`
	FreeMemoryBytes      *int64            `json:"freeMemoryBytes,omitempty"`
	ConversationsThatFit *int64            `json:"conversationsThatFit,omitempty"`
	VLLM                 *capacity.VLLMFit `json:"vllm,omitempty"`
}

func newCapacityKVCommand() *cobra.Command {
	o := &kvOptions{}
	cmd := &cobra.Command{
		Use:   "kv --layers N --kv-heads N --head-dim N --context TOKENS [--dtype fp16] [--free-memory SIZE | --gpu-memory SIZE --weights-size SIZE --max-num-seqs N]",
		Short: "KV cache per token and per conversation, and how many conversations fit",
		Long: `kv computes the KV cache of a model: 2 × layers × KV heads × head dim × bytes per value per
token, times --context tokens per conversation, and how many such conversations fit in
--free-memory.

With --gpu-memory, --weights-size and --max-num-seqs it checks a vLLM configuration instead
(--context is then --max-model-len): --max-num-seqs sequences at --max-model-len must fit in
gpu-memory × --gpu-memory-utilization − weights; exit code 1 when they do not.

Sizes: 10Gi, 10GiB, 16GB, 16G or a byte count.`,
		Example: `  auditor capacity kv --layers 32 --kv-heads 8 --head-dim 128 --dtype fp16 --context 8000 --free-memory 10GiB
  auditor capacity kv --layers 32 --kv-heads 8 --head-dim 128 --context 16384 \
      --gpu-memory 48305799168 --weights-size 16060522496 --gpu-memory-utilization 0.9 --max-num-seqs 64 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd, cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.Int64Var(&o.model.Layers, "layers", 0, "transformer layers (annotation platform.llm/model-layers)")
	f.Int64Var(&o.model.KVHeads, "kv-heads", 0, "key/value heads (platform.llm/model-kv-heads)")
	f.Int64Var(&o.model.HeadDim, "head-dim", 0, "head dimension (platform.llm/model-head-dim)")
	f.StringVar(&o.model.DType, "dtype", "fp16", "KV cache dtype: fp16, bf16, fp8, int8 or fp32")
	f.Int64Var(&o.context, "context", 0, "tokens per conversation (prompt + output); --max-model-len for the vLLM check")
	f.StringVar(&o.freeMemory, "free-memory", "", "GPU memory left for the KV cache, e.g. 10GiB")
	f.StringVar(&o.gpuMemory, "gpu-memory", "", "memory of one card, for the vLLM check (platform.llm/gpu-memory-bytes)")
	f.StringVar(&o.weights, "weights-size", "", "weights in GPU memory, for the vLLM check (platform.llm/weights-bytes)")
	f.Float64Var(&o.utilization, "gpu-memory-utilization", 0.9, "vLLM --gpu-memory-utilization, for the vLLM check")
	f.Int64Var(&o.maxNumSeqs, "max-num-seqs", 0, "vLLM --max-num-seqs, for the vLLM check")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func (o *kvOptions) run(cmd *cobra.Command, w io.Writer) error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	for _, req := range []struct {
		name string
		v    int64
	}{{"layers", o.model.Layers}, {"kv-heads", o.model.KVHeads}, {"head-dim", o.model.HeadDim}, {"context", o.context}} {
		if req.v <= 0 {
			return usageErr("--%s is required and must be positive", req.name)
		}
	}
	vllm := o.gpuMemory != "" || o.weights != "" || cmd.Flags().Changed("max-num-seqs")
	if vllm && o.freeMemory != "" {
		return usageErr("--free-memory and the vLLM check (--gpu-memory, --weights-size, --max-num-seqs) are mutually exclusive")
	}
	if vllm && (o.gpuMemory == "" || o.weights == "" || o.maxNumSeqs <= 0) {
		return usageErr("the vLLM check needs --gpu-memory, --weights-size and a positive --max-num-seqs")
	}

	res := kvResult{Model: o.model, ContextTokens: o.context}
	var err error
	if res.BytesPerToken, err = capacity.BytesPerToken(o.model); err != nil {
		return inputErr(err)
	}
	if res.ConversationBytes, err = capacity.ConversationBytes(o.model, o.context); err != nil {
		return inputErr(err)
	}
	switch {
	case vllm:
		gpu, err := capacity.ParseBytes(o.gpuMemory)
		if err != nil {
			return usageErr("--gpu-memory: %w", err)
		}
		weights, err := capacity.ParseBytes(o.weights)
		if err != nil {
			return usageErr("--weights-size: %w", err)
		}
		fit, err := capacity.CheckVLLM(capacity.VLLMConfig{
			Model: o.model, WeightsBytes: weights, GPUMemoryBytes: gpu,
			GPUMemoryUtilization: o.utilization, MaxModelLen: o.context, MaxNumSeqs: o.maxNumSeqs,
		})
		if err != nil {
			return inputErr(err)
		}
		res.VLLM = &fit
		free := fit.KVAvailableBytes
		res.FreeMemoryBytes = &free
	case o.freeMemory != "":
		free, err := capacity.ParseBytes(o.freeMemory)
		if err != nil {
			return usageErr("--free-memory: %w", err)
		}
		res.FreeMemoryBytes = &free
	}
	if res.FreeMemoryBytes != nil {
		n, err := capacity.ConversationsThatFit(o.model, o.context, *res.FreeMemoryBytes)
		if err != nil {
			return inputErr(err)
		}
		res.ConversationsThatFit = &n
	}

	if o.output == "json" {
		if err := writeJSON(w, res); err != nil {
			return err
		}
	} else {
		bpv, _ := capacity.BytesPerValue(o.model.DType)
		fmt.Fprintf(w, "bytes per token:        %d B (%s) = 2 × %d layers × %d KV heads × %d head dim × %d B (%s)\n",
			res.BytesPerToken, capacity.HumanBytes(res.BytesPerToken), o.model.Layers, o.model.KVHeads, o.model.HeadDim, bpv, o.model.DType)
		fmt.Fprintf(w, "per conversation:       %d B (%s) for %d tokens\n",
			res.ConversationBytes, capacity.HumanBytes(res.ConversationBytes), o.context)
		if res.FreeMemoryBytes != nil {
			fmt.Fprintf(w, "free memory:            %d B (%s)\n", *res.FreeMemoryBytes, capacity.HumanBytes(*res.FreeMemoryBytes))
			fmt.Fprintf(w, "conversations that fit: %d\n", *res.ConversationsThatFit)
		}
		if res.VLLM != nil {
			verdict := "fits"
			if !res.VLLM.Fits {
				verdict = "DOES NOT FIT"
			}
			fmt.Fprintf(w, "vllm worst case:        %s: %s\n", verdict, res.VLLM.Explanation)
		}
	}
	if res.VLLM != nil && !res.VLLM.Fits {
		return &exitError{code: 1, err: errors.New("KV cache does not fit")}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// hpa

type hpaOptions struct {
	current        int32
	metric, target float64
	hpa            capacity.HPA
	recent         []string
	output         string
}

type hpaResult struct {
	capacity.HPADecision
	MinReplicas            int32   `json:"minReplicas"`
	MaxReplicas            int32   `json:"maxReplicas,omitempty"`
	Tolerance              float64 `json:"tolerance"`
	ScaleDownWindowSeconds float64 `json:"scaleDownWindowSeconds"`
	ScaleUpWindowSeconds   float64 `json:"scaleUpWindowSeconds"`
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
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd, cmd.OutOrStdout()) },
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
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func (o *hpaOptions) run(cmd *cobra.Command, w io.Writer) error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	for _, req := range []string{"current", "metric", "target"} {
		if !cmd.Flags().Changed(req) {
			return usageErr("--%s is required", req)
		}
	}
	var history []capacity.Recommendation
	for _, r := range o.recent {
		age, n, ok := strings.Cut(r, "=")
		d, err1 := time.ParseDuration(strings.TrimSpace(age))
		v, err2 := strconv.ParseInt(strings.TrimSpace(n), 10, 32)
		if !ok || err1 != nil || err2 != nil || d < 0 || v < 0 {
			return usageErr("--recent %q: want AGE=REPLICAS, e.g. 2m=8", r)
		}
		history = append(history, capacity.Recommendation{Age: d, Replicas: int32(v)})
	}
	d, err := o.hpa.Desired(o.current, o.metric, o.target, history)
	if err != nil {
		return inputErr(err)
	}
	if o.output == "json" {
		return writeJSON(w, hpaResult{
			HPADecision: d, MinReplicas: o.hpa.MinReplicas, MaxReplicas: o.hpa.MaxReplicas,
			Tolerance: o.hpa.Tolerance, ScaleDownWindowSeconds: seconds(o.hpa.ScaleDownWindow),
			ScaleUpWindowSeconds: seconds(o.hpa.ScaleUpWindow),
		})
	}
	fmt.Fprintf(w, "desired replicas: %d (current %d)\n", d.Desired, d.Current)
	for _, s := range d.Steps[:len(d.Steps)-1] { // the last step repeats the result
		fmt.Fprintf(w, "  %s\n", s)
	}
	up := "none"
	if o.hpa.ScaleUpWindow > 0 {
		up = fmt.Sprintf("%g s (lowest recommendation in the window)", seconds(o.hpa.ScaleUpWindow))
	}
	maxS := "unbounded"
	if o.hpa.MaxReplicas > 0 {
		maxS = strconv.Itoa(int(o.hpa.MaxReplicas))
	}
	fmt.Fprintf(w, "rules:\n")
	fmt.Fprintf(w, "  tolerance %g %%: no change while %g ≤ metric/target ≤ %g\n",
		o.hpa.Tolerance*100, 1-o.hpa.Tolerance, 1+o.hpa.Tolerance)
	fmt.Fprintf(w, "  stabilisation: scale-down %g s (highest recommendation in the window), scale-up %s\n",
		seconds(o.hpa.ScaleDownWindow), up)
	fmt.Fprintf(w, "  replicas clamped to [%d, %s]\n", o.hpa.MinReplicas, maxS)
	return nil
}

// ---------------------------------------------------------------------------------------------
// coldstart

type coldStartOptions struct {
	node, loadTime, engineInit           time.Duration
	image, pull, weights, download, load string
	budget, probeDelay, probePeriod      time.Duration
	probeThreshold                       int32
	output                               string
}

type stageJSON struct {
	Name        string  `json:"name"`
	Seconds     float64 `json:"seconds"`
	Detail      string  `json:"detail"`
	InContainer bool    `json:"inContainer"`
}

type probeJSON struct {
	BudgetSeconds     float64 `json:"budgetSeconds"`
	CoversInContainer bool    `json:"coversInContainer"`
	CoversTotal       bool    `json:"coversTotal"`
	Explanation       string  `json:"explanation"`
}

type coldStartJSON struct {
	Stages             []stageJSON `json:"stages"`
	TotalSeconds       float64     `json:"totalSeconds"`
	InContainerSeconds float64     `json:"inContainerSeconds"`
	StartupProbe       *probeJSON  `json:"startupProbe,omitempty"`
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
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd, cmd.OutOrStdout()) },
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
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func (o *coldStartOptions) run(cmd *cobra.Command, w io.Writer) error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	flags := cmd.Flags()
	if flags.Changed("load-bandwidth") && flags.Changed("load-time") {
		return usageErr("--load-bandwidth and --load-time are mutually exclusive")
	}
	probeFlags := flags.Changed("probe-initial-delay") || flags.Changed("probe-period") || flags.Changed("probe-failure-threshold")
	if probeFlags && flags.Changed("startup-probe-budget") {
		return usageErr("--startup-probe-budget and --probe-* are mutually exclusive")
	}
	if probeFlags {
		if o.probeThreshold <= 0 || o.probePeriod <= 0 || o.probeDelay < 0 {
			return usageErr("--probe-failure-threshold and --probe-period must be positive, --probe-initial-delay not negative")
		}
		o.budget = capacity.StartupProbeBudget(o.probeDelay, o.probePeriod, o.probeThreshold)
	}
	if flags.Changed("startup-probe-budget") && o.budget <= 0 {
		return usageErr("--startup-probe-budget must be positive")
	}

	c := capacity.ColdStart{NodeProvisioning: o.node, LoadTime: o.loadTime, EngineInit: o.engineInit}
	var err error
	if c.ImageBytes, err = capacity.ParseBytes(o.image); err != nil {
		return usageErr("--image-size: %w", err)
	}
	if c.WeightsBytes, err = capacity.ParseBytes(o.weights); err != nil {
		return usageErr("--weights-size: %w", err)
	}
	for _, bw := range []struct {
		flag, v string
		dst     *float64
		needed  bool
	}{
		{"pull-bandwidth", o.pull, &c.PullBandwidth, c.ImageBytes > 0},
		{"download-bandwidth", o.download, &c.DownloadBandwidth, c.WeightsBytes > 0},
		{"load-bandwidth", o.load, &c.LoadBandwidth, !flags.Changed("load-time")},
	} {
		if !bw.needed {
			continue
		}
		if *bw.dst, err = capacity.ParseBandwidth(bw.v); err != nil {
			return usageErr("--%s: %w", bw.flag, err)
		}
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

	if o.output == "json" {
		out := coldStartJSON{TotalSeconds: seconds(e.Total), InContainerSeconds: seconds(e.InContainer)}
		for _, s := range e.Stages {
			out.Stages = append(out.Stages, stageJSON{Name: s.Name, Seconds: seconds(s.Duration), Detail: s.Detail, InContainer: s.InContainer})
		}
		if probe != nil {
			out.StartupProbe = &probeJSON{BudgetSeconds: seconds(probe.Budget), CoversInContainer: probe.CoversInContainer,
				CoversTotal: probe.CoversTotal, Explanation: probe.Explanation}
		}
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "%-20s %7s  %s\n", "STAGE", "TIME", "DETAIL")
		for i, s := range e.Stages {
			where := ""
			if s.InContainer {
				where = " [in container]"
			}
			fmt.Fprintf(w, "%-20s %7s  %s%s\n", fmt.Sprintf("%d. %s", i+1, s.Name), fmt.Sprintf("%g s", seconds(s.Duration)), s.Detail, where)
		}
		fmt.Fprintf(w, "%-20s %7s  %s; %g s after container start\n", "total", fmt.Sprintf("%g s", seconds(e.Total)),
			e.Total.Round(time.Second), seconds(e.InContainer))
		if probe != nil {
			fmt.Fprintln(w, probe.Explanation)
		}
	}
	if probe != nil && !probe.CoversInContainer {
		return &exitError{code: 1, err: errors.New("startup probe budget too short")}
	}
	return nil
}
