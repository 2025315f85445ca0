package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/llm-gitops/platform/internal/platform/cost"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// minGPURootVolume is the smallest root volume of a GPU node: the vLLM image alone is ~10 GB
// compressed and twice that unpacked, beside the GPU Operator's agents and the batch images; the
// AMI's default (20 GiB) fills on the first pull.
var minGPURootVolume = resource.MustParse("100Gi")

// gpuNodePools returns the rendered NodePools whose nodes carry GPUs: tainted nvidia.com/gpu,
// labelled with a card (accelerator), asking for a GPU instance, or limited in nvidia.com/gpu.
func gpuNodePools(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().Group != "karpenter.sh" || o.GetKind() != "NodePool" {
			continue
		}
		if isGPUNodePool(o) {
			out = append(out, o)
		}
	}
	return out
}

func isGPUNodePool(o *unstructured.Unstructured) bool {
	taints, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "taints")
	for _, t := range taints {
		if k, _, _ := unstructured.NestedString(asMap(t), "key"); k == "nvidia.com/gpu" {
			return true
		}
	}
	if _, ok, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "labels", "accelerator"); ok {
		return true
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "limits", "nvidia.com/gpu"); ok {
		return true
	}
	reqs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "requirements")
	for _, r := range reqs {
		if k, _, _ := unstructured.NestedString(asMap(r), "key"); strings.HasPrefix(k, "karpenter.k8s.aws/instance-gpu-") {
			return true
		}
	}
	return false
}

// gpuNodeClassRoot checks the node class of every GPU NodePool: it is in Git (rendered with the
// env), its root volume is at least minGPURootVolume, and its AMI is pinned. A class the env does
// not render (the `default` of issue #15) gives nodes whatever the cluster holds: the AMI's 20 GiB
// root. An AMI alias `family@latest`, or a selector by name or tags, rolls every GPU node whenever a
// new image is published; an alias `family@vYYYYMMDD` or an AMI id does not.
func gpuNodeClassRoot(objs []*unstructured.Unstructured) []Violation {
	classes := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GroupVersionKind().Group == "karpenter.k8s.aws" && o.GetKind() == "EC2NodeClass" {
			classes[o.GetName()] = o
		}
	}
	var out []Violation
	for _, pool := range gpuNodePools(objs) {
		ref, _, _ := unstructured.NestedStringMap(pool.Object, "spec", "template", "spec", "nodeClassRef")
		bad := func(format string, a ...any) {
			out = append(out, Violation{Rule: "gpu-nodeclass-root", Object: id(pool), Message: id(pool) + ": " + fmt.Sprintf(format, a...)})
		}
		if ref["group"] != "karpenter.k8s.aws" || ref["kind"] != "EC2NodeClass" {
			bad("nodeClassRef %s/%s %s is not an EC2NodeClass: its root volume and AMI cannot be checked", ref["group"], ref["kind"], ref["name"])
			continue
		}
		class, ok := classes[ref["name"]]
		if !ok {
			bad("uses EC2NodeClass %s, which the env does not render: its root volume and AMI are not in Git (an AMI default root is 20 GiB, less than the vLLM image unpacked); add the class to base/node-pools", ref["name"])
			continue
		}
		cid := id(class)
		alias, family := amiAlias(class)
		size, device, found := rootVolume(class, family)
		switch {
		case !found:
			bad("%s has no root volume (blockDeviceMappings %s): the AMI default (20 GiB) is too small for GPU images; set at least %s gp3", cid, device, minGPURootVolume.String())
		case size.Cmp(minGPURootVolume) < 0:
			bad("%s's root volume %s is %s, below %s: the vLLM image (~10 GB compressed, twice that unpacked) and the GPU agents' images fill it", cid, device, size.String(), minGPURootVolume.String())
		}
		switch {
		case strings.HasSuffix(alias, "@latest"):
			bad("%s selects AMI alias %s: every AMI AWS publishes drifts and replaces the GPU nodes; pin a version (%s@vYYYYMMDD)", cid, alias, family)
		case alias == "" && !amiByID(class):
			bad("%s selects its AMI by name, tags or SSM parameter, not by a pinned alias or id: a newly published image replaces the GPU nodes", cid)
		}
	}
	return out
}

// amiAlias returns a node class's AMI alias (al2023@v20260714) and its family, "" when none.
func amiAlias(class *unstructured.Unstructured) (string, string) {
	terms, _, _ := unstructured.NestedSlice(class.Object, "spec", "amiSelectorTerms")
	for _, t := range terms {
		if a, _, _ := unstructured.NestedString(asMap(t), "alias"); a != "" {
			family, _, _ := strings.Cut(a, "@")
			return a, family
		}
	}
	return "", ""
}

// amiByID reports whether every AMI selector term names an AMI id.
func amiByID(class *unstructured.Unstructured) bool {
	terms, _, _ := unstructured.NestedSlice(class.Object, "spec", "amiSelectorTerms")
	for _, t := range terms {
		if v, _, _ := unstructured.NestedString(asMap(t), "id"); v == "" {
			return false
		}
	}
	return len(terms) > 0
}

// rootVolume returns the size of the volume images and the kubelet live on: the mapping marked
// rootVolume, else the family's device (/dev/xvda; Bottlerocket keeps them on /dev/xvdb).
func rootVolume(class *unstructured.Unstructured, family string) (resource.Quantity, string, bool) {
	device := "/dev/xvda"
	if family == "bottlerocket" {
		device = "/dev/xvdb"
	}
	maps, _, _ := unstructured.NestedSlice(class.Object, "spec", "blockDeviceMappings")
	var chosen map[string]any
	for _, m := range maps {
		if root, _, _ := unstructured.NestedBool(asMap(m), "rootVolume"); root {
			chosen = asMap(m)
		}
	}
	if chosen == nil {
		for _, m := range maps {
			if d, _, _ := unstructured.NestedString(asMap(m), "deviceName"); d == device {
				chosen = asMap(m)
			}
		}
	}
	if chosen == nil {
		return resource.Quantity{}, device, false
	}
	device, _, _ = unstructured.NestedString(chosen, "deviceName")
	v, _, _ := unstructured.NestedString(chosen, "ebs", "volumeSize")
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}, device, false
	}
	return q, device, true
}

// batchPreemption checks the GPU Jobs and CronJobs: batch runs at the lowest priority on the GPU
// pool, so vLLM preempts it and Karpenter drains its nodes. A Job without a podFailurePolicy
// counts each such eviction against backoffLimit and fails on its first preemption (backoffLimit
// 1 with one retry used); a rule `Ignore` on the pod condition DisruptionTarget replaces the pod
// without counting. The pod annotation karpenter.sh/do-not-disrupt keeps Karpenter from
// consolidating or drifting a node under a running job.
func batchPreemption(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, o := range objs {
		var job []string
		switch o.GroupVersionKind().GroupKind().String() {
		case "Job.batch":
			job = []string{"spec"}
		case "CronJob.batch":
			job = []string{"spec", "jobTemplate", "spec"}
		default:
			continue
		}
		if _, hook := o.GetAnnotations()[hookAnnotation]; hook {
			continue
		}
		pod := podTemplate(o)
		if pod == nil || cost.GPUs(pod) == 0 {
			continue
		}
		if !ignoresDisruption(o, job) {
			out = append(out, Violation{Rule: "batch-preemption", Object: id(o), Message: id(o) + " asks for a GPU but has no podFailurePolicy rule {action: Ignore, onPodConditions: [{type: DisruptionTarget}]}: each preemption by inference or node drain counts against backoffLimit, so the job fails on its first preemptions instead of being replaced"})
		}
		ann, _, _ := unstructured.NestedStringMap(o.Object, append(job, "template", "metadata", "annotations")...)
		if ann["karpenter.sh/do-not-disrupt"] != "true" {
			out = append(out, Violation{Rule: "batch-preemption", Object: id(o), Message: id(o) + "'s pods lack the annotation karpenter.sh/do-not-disrupt: \"true\": Karpenter may consolidate or drift the GPU node under a running job"})
		}
	}
	return out
}

// ignoresDisruption reports whether a job spec's podFailurePolicy ignores pods evicted for a
// disruption (condition DisruptionTarget, status True) before any other rule decides.
func ignoresDisruption(o *unstructured.Unstructured, job []string) bool {
	rules, _, _ := unstructured.NestedSlice(o.Object, append(job, "podFailurePolicy", "rules")...)
	for _, r := range rules {
		conds, _, _ := unstructured.NestedSlice(asMap(r), "onPodConditions")
		for _, c := range conds {
			cm := asMap(c)
			status, ok, _ := unstructured.NestedString(cm, "status")
			if cm["type"] != "DisruptionTarget" || ok && status != "True" {
				continue
			}
			// The first rule matching a failed pod decides: only an Ignore counts.
			action, _, _ := unstructured.NestedString(asMap(r), "action")
			return action == "Ignore"
		}
	}
	return false
}

// sortViolations orders violations by object, then message, for stable output.
func sortViolations(vs []Violation) []Violation {
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].Object != vs[j].Object {
			return vs[i].Object < vs[j].Object
		}
		return vs[i].Message < vs[j].Message
	})
	return vs
}
