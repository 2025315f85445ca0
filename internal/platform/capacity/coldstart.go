package capacity

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// ColdStart declares what a vLLM replica goes through before it serves its first request on a
// fresh GPU node.
type ColdStart struct {
	// NodeProvisioning is how long a new GPU node takes to join and become schedulable
	// (Karpenter, on-demand: ~90 s).
	NodeProvisioning time.Duration
	// ImageBytes is the container image size; PullBandwidth the registry throughput in B/s.
	ImageBytes    int64
	PullBandwidth float64
	// WeightsBytes is the model weights size; DownloadBandwidth the model cache or object store
	// throughput in B/s.
	WeightsBytes      int64
	DownloadBandwidth float64
	// LoadBandwidth is how fast weights are copied into GPU memory, in B/s. When 0, LoadTime is
	// taken as declared.
	LoadBandwidth float64
	// LoadTime is a declared weights-loading time, used when LoadBandwidth is 0.
	LoadTime time.Duration
	// EngineInit is the engine's own start-up after loading: CUDA graph capture, KV cache
	// allocation, warm-up.
	EngineInit time.Duration
}

// DefaultColdStart returns the platform's reference cold start (docs/platform.md, Llama-3.1-8B
// on a fresh L40S node): node provisioning 90 s; a 10 GB image pulled at 1 Gbit/s, 80 s;
// 16 GB of weights read at 1 Gbit/s, 128 s; loaded at 2 GB/s, 8 s, plus 30 s of engine
// start-up. Total 336 s = 5 min 36 s, inside the 4–6 minutes the seed documents state.
func DefaultColdStart() ColdStart {
	return ColdStart{
		NodeProvisioning:  90 * time.Second,
		ImageBytes:        10e9,
		PullBandwidth:     1e9 / 8,
		WeightsBytes:      16e9,
		DownloadBandwidth: 1e9 / 8,
		LoadBandwidth:     2e9,
		EngineInit:        30 * time.Second,
	}
}

// Stage is one step of a cold start. The cold-start types carry time.Duration and no JSON
// tags: callers choose how to render durations (the CLI writes seconds).
type Stage struct {
	// Name names the stage.
	Name string
	// Duration is how long it takes.
	Duration time.Duration
	// Detail shows the arithmetic.
	Detail string
	// InContainer is true for stages after the container has started, the only ones the
	// startupProbe clock sees.
	InContainer bool
}

// ColdStartEstimate is the result of ColdStart.Estimate.
type ColdStartEstimate struct {
	// Stages are, in order: node provisioning, image pull, weights download, load into GPU.
	Stages []Stage
	// Total is the sum of all stages: from "a replica is needed" to "it serves".
	Total time.Duration
	// InContainer is the sum of the stages after container start.
	InContainer time.Duration
}

// Estimate adds up the four stages of a cold start: node provisioning (declared), image pull
// (ImageBytes / PullBandwidth), weights download (WeightsBytes / DownloadBandwidth) and load
// into GPU (WeightsBytes / LoadBandwidth, or LoadTime, plus EngineInit). Durations are rounded
// up to the second. The last two run inside the container, which reads the weights itself.
func (c ColdStart) Estimate() (ColdStartEstimate, error) {
	var e ColdStartEstimate
	switch {
	case c.NodeProvisioning < 0 || c.LoadTime < 0 || c.EngineInit < 0:
		return e, fmt.Errorf("cold start: node provisioning %s, load %s, engine init %s must not be negative: %w",
			c.NodeProvisioning, c.LoadTime, c.EngineInit, ErrInvalid)
	case c.ImageBytes < 0 || c.WeightsBytes < 0:
		return e, fmt.Errorf("cold start: image %d B and weights %d B must not be negative: %w", c.ImageBytes, c.WeightsBytes, ErrInvalid)
	case c.ImageBytes > 0 && !(c.PullBandwidth > 0):
		return e, fmt.Errorf("cold start: image of %s needs a positive pull bandwidth: %w", HumanBytes(c.ImageBytes), ErrInvalid)
	case c.WeightsBytes > 0 && !(c.DownloadBandwidth > 0):
		return e, fmt.Errorf("cold start: weights of %s need a positive download bandwidth: %w", HumanBytes(c.WeightsBytes), ErrInvalid)
	case c.LoadBandwidth < 0 || math.IsNaN(c.LoadBandwidth):
		return e, fmt.Errorf("cold start: load bandwidth %g must not be negative: %w", c.LoadBandwidth, ErrInvalid)
	}

	e.Stages = append(e.Stages, Stage{
		Name:     "node provisioning",
		Duration: c.NodeProvisioning,
		Detail:   "declared",
	})
	pull := transfer(c.ImageBytes, c.PullBandwidth)
	e.Stages = append(e.Stages, Stage{
		Name:     "image pull",
		Duration: pull,
		Detail:   fmt.Sprintf("%s at %s", decimalBytes(c.ImageBytes), HumanBandwidth(c.PullBandwidth)),
	})
	dl := transfer(c.WeightsBytes, c.DownloadBandwidth)
	e.Stages = append(e.Stages, Stage{
		Name:        "weights download",
		Duration:    dl,
		Detail:      fmt.Sprintf("%s at %s", decimalBytes(c.WeightsBytes), HumanBandwidth(c.DownloadBandwidth)),
		InContainer: true,
	})
	load, detail := c.LoadTime, fmt.Sprintf("declared %s", secs(c.LoadTime))
	if c.LoadBandwidth > 0 {
		load = transfer(c.WeightsBytes, c.LoadBandwidth)
		detail = fmt.Sprintf("%s at %s = %s", decimalBytes(c.WeightsBytes), HumanBandwidth(c.LoadBandwidth), secs(load))
	}
	e.Stages = append(e.Stages, Stage{
		Name:        "load into GPU",
		Duration:    load + c.EngineInit,
		Detail:      fmt.Sprintf("%s, + %s engine init", detail, secs(c.EngineInit)),
		InContainer: true,
	})
	for _, s := range e.Stages {
		e.Total += s.Duration
		if s.InContainer {
			e.InContainer += s.Duration
		}
	}
	return e, nil
}

// transfer is bytes / bandwidth rounded up to the second; 0 bytes take no time.
func transfer(bytes int64, bandwidth float64) time.Duration {
	if bytes == 0 {
		return 0
	}
	return time.Duration(math.Ceil(float64(bytes)/bandwidth)) * time.Second
}

// StartupProbeBudget returns how long a startupProbe lets a container start before the kubelet
// kills it: initialDelay + failureThreshold × period. The platform's probe (60 s, 10 s, 36)
// allows 420 s. (The kubelet's exact limit is up to one period shorter, as the first probe
// runs at initialDelay; the seed documents use this formula.)
func StartupProbeBudget(initialDelay, period time.Duration, failureThreshold int32) time.Duration {
	return initialDelay + time.Duration(failureThreshold)*period
}

// ProbeCheck compares a startupProbe budget with a cold start.
type ProbeCheck struct {
	// Budget is the startupProbe budget.
	Budget time.Duration
	// Total is the whole cold start, node provisioning included.
	Total time.Duration
	// InContainer is the part of the cold start after container start.
	InContainer time.Duration
	// CoversInContainer is true when Budget ≥ InContainer: the kubelet will not kill a
	// starting replica. This is the real requirement.
	CoversInContainer bool
	// CoversTotal is true when Budget ≥ Total, the conservative check the seed documents make
	// (420 s ≥ 360 s).
	CoversTotal bool
	// Explanation says so in words.
	Explanation string
}

// CheckStartupProbe checks that a startupProbe budget covers a cold start. The probe clock
// starts with the container, after node provisioning and image pull, so the requirement is
// Budget ≥ InContainer; Budget ≥ Total is the stricter margin the seed documents ask for.
func CheckStartupProbe(budget time.Duration, e ColdStartEstimate) (ProbeCheck, error) {
	if budget <= 0 {
		return ProbeCheck{}, fmt.Errorf("startup probe budget %s must be positive: %w", budget, ErrInvalid)
	}
	p := ProbeCheck{
		Budget:            budget,
		Total:             e.Total,
		InContainer:       e.InContainer,
		CoversInContainer: budget >= e.InContainer,
		CoversTotal:       budget >= e.Total,
	}
	switch {
	case p.CoversTotal:
		p.Explanation = fmt.Sprintf("startup probe budget %s covers the whole cold start of %s (%s to spare)",
			secs(budget), secs(e.Total), secs(budget-e.Total))
	case p.CoversInContainer:
		p.Explanation = fmt.Sprintf("startup probe budget %s covers the %s after container start, "+
			"which is what the kubelet measures, but not the whole cold start of %s (%s short of that margin)",
			secs(budget), secs(e.InContainer), secs(e.Total), secs(e.Total-budget))
	default:
		p.Explanation = fmt.Sprintf("startup probe budget %s is %s short of the %s after container start: "+
			"the kubelet will kill the replica before it serves; raise failureThreshold",
			secs(budget), secs(e.InContainer-budget), secs(e.InContainer))
	}
	return p, nil
}

// secs formats a duration in seconds, "300 s", as the seed documents and probe specs do.
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// decimalBytes formats a size with decimal units, "10 GB", as image and weights sizes are quoted.
func decimalBytes(b int64) string { return si(float64(b)) + "B" }
