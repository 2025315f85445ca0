package check

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/cost"
)

// startupMargin is how much longer than the cold-start estimate a startupProbe budget must be:
// the estimate assumes nominal bandwidths, and a probe that runs out kills the replica and starts
// the whole cold start again.
const startupMargin = 1.2

// capacityInvariants checks the seeds' arithmetic on an env's rendered objects:
//   - a vLLM Deployment's KV cache at --max-model-len × --max-num-seqs fits the GPU memory left
//     after the weights under --gpu-memory-utilization (model facts from its annotations);
//   - the GPU workloads at their maximum scale fit the GPU NodePool's nvidia.com/gpu limit;
//   - a vLLM startupProbe budget covers the cold-start estimate with startupMargin to spare.
func capacityInvariants(objs []*unstructured.Unstructured) (violations, warnings []Violation) {
	maxOf := map[string]int64{} // Deployment name -> max replicas from its autoscaler
	var poolLimit int64 = -1
	for _, o := range objs {
		switch o.GetKind() {
		case "ScaledObject":
			target, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name")
			m, ok, _ := unstructured.NestedInt64(o.Object, "spec", "maxReplicaCount")
			if !ok {
				m = 100 // KEDA's default
			}
			maxOf[o.GetNamespace()+"/"+target] = m
		case "HorizontalPodAutoscaler":
			target, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name")
			m, _, _ := unstructured.NestedInt64(o.Object, "spec", "maxReplicas")
			maxOf[o.GetNamespace()+"/"+target] = m
		case "NodePool":
			if v, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "limits", "nvidia.com/gpu"); ok {
				if q, err := resource.ParseQuantity(fmt.Sprint(v)); err == nil {
					poolLimit = q.Value()
				}
			}
		}
	}
	var demand int64
	var parts []string
	for _, o := range objs {
		pod, count := podAndCount(o, maxOf)
		if pod == nil {
			continue
		}
		gpus := cost.GPUs(pod)
		if gpus > 0 {
			demand += gpus * count
			parts = append(parts, fmt.Sprintf("%s %d×%d", o.GetName(), count, gpus))
		}
		if o.GetKind() == "Deployment" && o.GetAnnotations()["platform.llm/model"] != "" {
			violations = append(violations, vllmChecks(o, pod)...)
		}
	}
	if poolLimit >= 0 && demand > poolLimit {
		violations = append(violations, Violation{Rule: "capacity-gpu-pool-limit", Object: "NodePool gpu",
			Message: fmt.Sprintf("GPU workloads at maximum scale need %d GPUs (%s) but the GPU NodePool is limited to %d", demand, strings.Join(parts, " + "), poolLimit)})
	}
	return violations, warnings
}

// podAndCount returns the pod spec of a workload and how many pods it runs at most.
func podAndCount(o *unstructured.Unstructured, maxOf map[string]int64) (map[string]any, int64) {
	var pod map[string]any
	var count int64 = 1
	switch o.GetKind() {
	case "Deployment", "StatefulSet":
		pod, _, _ = unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if r, ok, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); ok {
			count = r
		}
		if m, ok := maxOf[o.GetNamespace()+"/"+o.GetName()]; ok {
			count = m
		}
	case "CronJob": // concurrencyPolicy Forbid: one job at a time
		pod, _, _ = unstructured.NestedMap(o.Object, "spec", "jobTemplate", "spec", "template", "spec")
		if p, ok, _ := unstructured.NestedInt64(o.Object, "spec", "jobTemplate", "spec", "parallelism"); ok {
			count = p
		}
	case "Job":
		pod, _, _ = unstructured.NestedMap(o.Object, "spec", "template", "spec")
	}
	return pod, count
}

// vllmChecks applies the KV-cache and cold-start invariants to one vLLM Deployment.
func vllmChecks(o *unstructured.Unstructured, pod map[string]any) []Violation {
	var out []Violation
	ann := o.GetAnnotations()
	obj := id(o)
	cs, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(cs) == 0 {
		return nil
	}
	c := cs[0].(map[string]any)
	cfg, err := SeqsConfigOf(o).WithOverhead()
	var fit capacity.VLLMFit
	if err == nil {
		fit, err = capacity.CheckVLLM(cfg)
	}
	switch {
	case err != nil:
		out = append(out, Violation{Rule: "capacity-kv-cache", Object: obj, Message: "model facts missing or invalid (annotations platform.llm/model-*, weights-bytes, gpu-memory-bytes; args --max-model-len, --max-num-seqs): " + err.Error()})
	case !fit.Fits:
		out = append(out, Violation{Rule: "capacity-kv-cache", Object: obj, Message: fit.Explanation})
	}
	delay, _, _ := unstructured.NestedInt64(c, "startupProbe", "initialDelaySeconds")
	period, ok, _ := unstructured.NestedInt64(c, "startupProbe", "periodSeconds")
	if !ok {
		period = 10
	}
	failures, ok, _ := unstructured.NestedInt64(c, "startupProbe", "failureThreshold")
	if !ok {
		failures = 3
	}
	cold := capacity.DefaultColdStart()
	if w := num(ann["platform.llm/weights-bytes"]); w > 0 {
		cold.WeightsBytes = w
	}
	est, err := cold.Estimate()
	budget := capacity.StartupProbeBudget(time.Duration(delay)*time.Second, time.Duration(period)*time.Second, int32(failures))
	if need := time.Duration(float64(est.Total) * startupMargin).Round(time.Second); err == nil && budget < need {
		out = append(out, Violation{Rule: "capacity-startup-probe", Object: obj,
			Message: fmt.Sprintf("startupProbe budget %s (initialDelay %ds + %d × %ds) is below the cold-start estimate %s plus %.0f%% margin (%s)", budget, delay, failures, period, est.Total, (startupMargin-1)*100, need)})
	}
	return out
}

// num parses an annotation or flag value as an integer; 0 when it is not one.
func num(s string) int64 { v, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64); return v }

// vllmConfig reads a vLLM Deployment's KV-cache facts: the model, weights and card from its
// annotations, the engine settings from its first container's args (--gpu-memory-utilization
// defaults to vLLM's 0.9).
func vllmConfig(ann, args map[string]string) capacity.VLLMConfig {
	util, _ := strconv.ParseFloat(args["--gpu-memory-utilization"], 64)
	if util == 0 {
		util = 0.9
	}
	return capacity.VLLMConfig{
		Model: capacity.Model{Layers: num(ann["platform.llm/model-layers"]), KVHeads: num(ann["platform.llm/model-kv-heads"]),
			HeadDim: num(ann["platform.llm/model-head-dim"]), DType: ann["platform.llm/model-dtype"]},
		WeightsBytes: num(ann["platform.llm/weights-bytes"]), GPUMemoryBytes: num(ann["platform.llm/gpu-memory-bytes"]),
		GPUMemoryUtilization: util, MaxModelLen: num(args["--max-model-len"]), MaxNumSeqs: num(args["--max-num-seqs"]),
	}
}

// flags reads --name=value and --name value arguments.
func flags(v any) map[string]string {
	out := map[string]string{}
	list, _ := v.([]any)
	for i := 0; i < len(list); i++ {
		a := fmt.Sprint(list[i])
		if k, val, ok := strings.Cut(a, "="); ok {
			out[k] = val
			continue
		}
		if strings.HasPrefix(a, "--") && i+1 < len(list) && !strings.HasPrefix(fmt.Sprint(list[i+1]), "--") {
			out[a] = fmt.Sprint(list[i+1])
			i++
			continue
		}
		out[a] = ""
	}
	return out
}
