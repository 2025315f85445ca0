package check

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/cost"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

// stackTable reads clusters/gpu-stack.yaml from src; nil when src has none (a revision from
// before the table checks no triple).
func stackTable(src render.Source) (*gpustack.Table, error) {
	if !src.Has(gpustack.File) {
		return nil, nil
	}
	data, err := src.ReadFile(gpustack.File)
	if err != nil {
		return nil, err
	}
	return gpustack.Parse(data)
}

// part is one pinned part of the GPU stack and the object that pins it.
type part struct{ value, object string }

// pinnedStack is what an env's render pins of the GPU stack: the AMI of each GPU NodePool's node
// class, the image of each container of a Deployment that asks for a GPU (the inference
// servers), and the GPU Operator Application's chart version.
type pinnedStack struct {
	amis, images []part
	operator     string
	// operatorDriver is set when the GPU Operator installs its own driver (driver.enabled).
	operatorDriver bool
}

// stackOf reads the pinned parts from an env's objects and its root's Applications.
func stackOf(objs, apps []*unstructured.Unstructured) pinnedStack {
	var s pinnedStack
	classes := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GroupVersionKind().Group == "karpenter.k8s.aws" && o.GetKind() == "EC2NodeClass" {
			classes[o.GetName()] = o
		}
	}
	for _, pool := range gpuNodePools(objs) {
		name, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "nodeClassRef", "name")
		if class, ok := classes[name]; ok {
			s.amis = append(s.amis, part{amiOf(class), id(class) + " (NodePool " + pool.GetName() + ")"})
		}
	}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind().String() != "Deployment.apps" {
			continue
		}
		pod := podTemplate(o)
		if pod == nil || cost.GPUs(pod) == 0 {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(pod, "containers")
		for _, c := range cs {
			limit, _, _ := unstructured.NestedFieldNoCopy(asMap(c), "resources", "limits", cost.GPUResource)
			if img, _, _ := unstructured.NestedString(asMap(c), "image"); img != "" && limit != nil {
				s.images = append(s.images, part{img, id(o)})
			}
		}
	}
	for _, a := range apps {
		if chart, _, _ := unstructured.NestedString(a.Object, "spec", "source", "chart"); chart == "gpu-operator" {
			s.operator, _, _ = unstructured.NestedString(a.Object, "spec", "source", "targetRevision")
			// The chart's default is driver.enabled=true: only an explicit false in valuesObject
			// leaves the AMI's driver the one that runs (values and parameters are not read, so
			// they do not count as saying it).
			enabled, found, _ := unstructured.NestedBool(a.Object, "spec", "source", "helm", "valuesObject", "driver", "enabled")
			s.operatorDriver = !found || enabled
		}
	}
	return s
}

// amiOf is a node class's AMI alias, else the id of its first selector term.
func amiOf(class *unstructured.Unstructured) string {
	if alias, _ := amiAlias(class); alias != "" {
		return alias
	}
	terms, _, _ := unstructured.NestedSlice(class.Object, "spec", "amiSelectorTerms")
	if len(terms) > 0 {
		v, _, _ := unstructured.NestedString(asMap(terms[0]), "id")
		return v
	}
	return ""
}

// none says whether the env pins no GPU stack at all.
func (s pinnedStack) none() bool { return len(s.amis) == 0 && len(s.images) == 0 }

// triple is the env's triple as one line of the table: its first AMI and image (the rule fails
// an env that pins several).
func (s pinnedStack) triple(t *gpustack.Table) gpustack.Triple {
	var tr gpustack.Triple
	if len(s.amis) > 0 {
		tr.AMI = s.amis[0].value
	}
	if len(s.images) > 0 {
		tr.Image = gpustack.Digest(s.images[0].value)
	}
	tr.GPUOperator = s.operator
	if t != nil {
		tr = t.Fill(tr)
	}
	return tr
}

// gpuStack is the rule gpu-stack: every AMI the env's GPU nodes pin has a known driver, every
// inference image is pinned by a digest with a known CUDA, the driver runs that CUDA by NVIDIA's
// minimums, and the render pins exactly the triple the env states in clusters/gpu-stack.yaml
// (stated, at the env's revision; the GPU Operator's version is stated at head, where apps/ syncs
// from).
func gpuStack(t, head *gpustack.Table, env string, s pinnedStack) []Violation {
	if t == nil || s.none() {
		return nil
	}
	var out []Violation
	bad := func(object, format string, a ...any) {
		out = append(out, Violation{Rule: "gpu-stack", Object: object, Message: object + ": " + fmt.Sprintf(format, a...)})
	}
	drivers := map[string]string{}
	for _, a := range s.amis {
		if ami, ok := t.Driver(a.value); ok {
			drivers[a.value] = ami.Driver
		} else {
			bad(a.object, "AMI %s has no known NVIDIA driver: add it to %s (amis: alias, driver, source: the AMI's release notes)", orNone(a.value), gpustack.File)
		}
	}
	if s.operatorDriver {
		bad("Application gpu-operator", "the GPU Operator installs its own driver (driver.enabled is true, or not set to false in helm.valuesObject, the chart's default being true): the AMI's driver in %s is then not the one that runs; set driver.enabled: false in valuesObject with an AMI that ships one", gpustack.File)
	}
	for _, img := range s.images {
		digest := gpustack.Digest(img.value)
		if digest == "" {
			bad(img.object, "image %s has no digest: the CUDA it was built for cannot be known; pin it by digest and add the digest to %s", img.value, gpustack.File)
			continue
		}
		known, ok := t.CUDAOf(digest)
		if !ok {
			bad(img.object, "image %s has no known CUDA: add its digest to %s (images: digest, cuda, source: the image's CUDA_VERSION or its release notes)", img.value, gpustack.File)
			continue
		}
		for _, a := range s.amis {
			driver, ok := drivers[a.value]
			if !ok {
				continue
			}
			v, err := t.CUDA.Compatible(driver, known.CUDA)
			switch {
			case err != nil:
				bad(img.object, "%v", err)
			case v.Minimum == "":
				bad(img.object, "image %s needs CUDA %s, for which %s states no minimum driver: add NVIDIA's to cuda", gpustack.ShortDigest(digest), known.CUDA, gpustack.File)
			case !v.OK:
				bad(img.object, "image %s needs CUDA %s, but AMI %s of %s ships driver %s, below %s (NVIDIA's minimum, %s): every pod would fail with CUDA's \"driver version is insufficient\"; move the AMI or the image so the triple holds",
					gpustack.ShortDigest(digest), known.CUDA, a.value, a.object, driver, v.Minimum, v.How)
			}
		}
	}
	out = append(out, statedStack(t, head, env, s)...)
	return sortViolations(out)
}

// statedStack fails a render that pins other parts than the triple its env states: a change of
// one part states the whole triple again.
func statedStack(t, head *gpustack.Table, env string, s pinnedStack) []Violation {
	obj := gpustack.File + " envs." + env
	stated, ok := t.Envs[env]
	if !ok {
		return []Violation{{Rule: "gpu-stack", Object: obj, Message: fmt.Sprintf("%s states no triple for %s, whose GPU nodes and inference images it must state (ami, image, gpuOperator)", gpustack.File, env)}}
	}
	var out []Violation
	differ := func(what, pinned, by, want string) {
		out = append(out, Violation{Rule: "gpu-stack", Object: obj, Message: fmt.Sprintf(
			"%s pins %s %s, but %s states %s for %s: a change of one part of the triple states the whole triple (ami, image, gpuOperator) in the same change", by, what, pinned, gpustack.File, orNone(want), env)})
	}
	for _, a := range s.amis {
		if a.value != stated.AMI {
			differ("AMI", a.value, a.object, stated.AMI)
		}
	}
	for _, img := range s.images {
		if d := gpustack.Digest(img.value); d != "" && d != stated.Image {
			differ("image", gpustack.ShortDigest(d), img.object, gpustack.ShortDigest(stated.Image))
		}
	}
	if head != nil && s.operator != "" {
		if want := head.Envs[env].GPUOperator; s.operator != want {
			differ("GPU Operator", s.operator, "Application gpu-operator", want)
		}
	}
	return out
}

// stackDrift says what a change of the triple replaces: a new AMI drifts every node of the GPU
// NodePools that use it, which Karpenter replaces within each pool's disruption budgets; a new
// image rolls the Deployments only. Warnings: the change may be right, the reviewer should know.
func stackDrift(before, after []*unstructured.Unstructured) []Violation {
	if before == nil {
		return nil
	}
	old := map[string]string{}
	for _, p := range gpuPoolPosture(before) {
		old[p.Pool] = p.AMI
	}
	var out []Violation
	for _, p := range gpuPoolPosture(after) {
		was, ok := old[p.Pool]
		if !ok || was == p.AMI {
			continue
		}
		out = append(out, Violation{Rule: "gpu-stack-drift", Object: "NodePool " + p.Pool, Message: fmt.Sprintf(
			"NodePool %s: its AMI moves %s → %s, so Karpenter replaces every node of the pool by drift, within its disruption budgets (%s); each vLLM replica there cold-starts on a new node, launched while the old one still counts against the pool's limit (rule gpu-pool-n-plus-one)",
			p.Pool, orNone(was), orNone(p.AMI), orNone(strings.Join(p.Budgets, "; ")))})
	}
	oldImg := map[string]string{}
	for _, pt := range stackOf(before, nil).images {
		oldImg[pt.object] = pt.value
	}
	var rolled []string
	for _, pt := range stackOf(after, nil).images {
		if was, ok := oldImg[pt.object]; ok && gpustack.Digest(was) != gpustack.Digest(pt.value) {
			rolled = append(rolled, pt.object)
		}
	}
	if len(rolled) > 0 {
		sort.Strings(rolled)
		out = append(out, Violation{Rule: "gpu-stack-drift", Object: rolled[0], Message: fmt.Sprintf(
			"the inference image changes in %s: the Deployments roll on the nodes they have (no node is replaced)", strings.Join(rolled, ", "))})
	}
	return out
}

// orNone is s, or "none" when empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
