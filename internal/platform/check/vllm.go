package check

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/platform/cost"
)

// weightsRevisionAnnotation names the weights revision a vLLM Deployment is configured for.
const weightsRevisionAnnotation = "platform.llm/weights-revision"

// vllmContainers returns the pod's regular containers that run a vLLM image.
func vllmContainers(pod map[string]any) []map[string]any {
	var out []map[string]any
	cs, _, _ := unstructured.NestedSlice(pod, "containers")
	for _, c := range cs {
		cm := asMap(c)
		if image, _, _ := unstructured.NestedString(cm, "image"); isVLLMImage(image) {
			out = append(out, cm)
		}
	}
	return out
}

// containerFlags reads the --flags of a container's command and args together.
func containerFlags(c map[string]any) map[string]string {
	var all []any
	for _, field := range []string{"command", "args"} {
		if l, ok := c[field].([]any); ok {
			all = append(all, l...)
		}
	}
	return flags(all)
}

// containerStrings lists every string a container is given: command, args and env values.
func containerStrings(c map[string]any) []string {
	var out []string
	for _, field := range []string{"command", "args"} {
		l, _ := c[field].([]any)
		for _, v := range l {
			out = append(out, fmt.Sprint(v))
		}
	}
	env, _ := c["env"].([]any)
	for _, e := range env {
		if v, ok, _ := unstructured.NestedString(asMap(e), "value"); ok {
			out = append(out, v)
		}
	}
	return out
}

// mentions reports whether any of the strings contains s.
func mentions(all []string, s string) bool {
	return slices.ContainsFunc(all, func(v string) bool { return strings.Contains(v, s) })
}

// vllmWeights checks that a vLLM pod serving weights from a path (--model=/models/<name>/<revision>,
// the model cache) cannot start on a revision the cache does not hold complete: an init container
// must wait for the marker <path>.ready that the weights-sync Job writes after verifying the
// checksums; a Job in the namespace must fill that path; and the path's last element must be the
// revision the Deployment's platform.llm/weights-revision annotation declares. Rule vllm-weights.
func vllmWeights(objs []*unstructured.Unstructured) []Violation {
	filled := map[string][]string{} // namespace -> strings the Jobs' containers are given
	for _, o := range objs {
		if o.GetKind() != "Job" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			filled[o.GetNamespace()] = append(filled[o.GetNamespace()], containerStrings(asMap(c))...)
		}
	}
	var out []Violation
	for _, o := range objs {
		pod := podTemplate(o)
		if pod == nil || o.GetKind() == "Job" {
			continue
		}
		var inits []string
		ics, _, _ := unstructured.NestedSlice(pod, "initContainers")
		for _, c := range ics {
			inits = append(inits, containerStrings(asMap(c))...)
		}
		for _, c := range vllmContainers(pod) {
			name, _, _ := unstructured.NestedString(c, "name")
			model := strings.TrimRight(containerFlags(c)["--model"], "/")
			if !strings.HasPrefix(model, "/") {
				continue // a Hub id or none: not served from the cache
			}
			add := func(msg string, a ...any) {
				out = append(out, Violation{Rule: "vllm-weights", Object: id(o), Message: fmt.Sprintf("container %s: ", name) + fmt.Sprintf(msg, a...)})
			}
			if marker := model + ".ready"; !mentions(inits, marker) {
				add("no init container waits for %s: vLLM would start on a missing or partly copied revision; add one that fails unless the marker exists", marker)
			}
			if !slices.Contains(filled[o.GetNamespace()], model) {
				add("no Job in %s fills %s (a weights-sync Job given that path): nothing puts this revision in the model cache", o.GetNamespace(), model)
			}
			if rev := o.GetAnnotations()[weightsRevisionAnnotation]; rev != "" && path.Base(model) != rev {
				add("--model=%s is not the revision %s declares (%s)", model, weightsRevisionAnnotation, rev)
			}
		}
	}
	return out
}

// noBF16 lists the cards (as node labels spell them, lower case) without bfloat16 support:
// compute capability below 8.0 (Turing T4, Volta V100, Pascal, Kepler, Maxwell).
var noBF16 = []string{"t4", "v100", "p100", "p40", "p4", "k80", "m60"}

// hasBF16 reports whether a card (a node label value) does bfloat16.
func hasBF16(card string) bool {
	for _, tok := range strings.FieldsFunc(card, func(r rune) bool { return r == '-' || r == '_' || r == ' ' || r == '.' }) {
		if slices.Contains(noBF16, tok) {
			return false
		}
	}
	return true
}

// vllmDtype checks vLLM's --dtype against the cards the pod is placed on: float16 (half) on cards
// that all do bf16 throws away the bf16 the models are trained in (overflow risk, no gain), and
// bfloat16 on a card without it fails at start. --dtype=auto takes the checkpoint's dtype. Pods
// whose card is not named are not checked. Rule vllm-dtype.
func vllmDtype(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, o := range objs {
		pod := podTemplate(o)
		if pod == nil {
			continue
		}
		cards := cost.Cards(pod)
		if len(cards) == 0 {
			continue
		}
		var without []string
		for _, c := range cards {
			if !hasBF16(c) {
				without = append(without, c)
			}
		}
		for _, c := range vllmContainers(pod) {
			name, _, _ := unstructured.NestedString(c, "name")
			dtype := strings.ToLower(containerFlags(c)["--dtype"])
			switch {
			case (dtype == "float16" || dtype == "half") && len(without) == 0:
				out = append(out, Violation{Rule: "vllm-dtype", Object: id(o), Message: fmt.Sprintf(
					"container %s: --dtype=%s on %s, which does bf16: models trained in bf16 lose range in fp16; use --dtype=auto (fp16 only for cards without bf16: T4, V100)",
					name, dtype, strings.Join(cards, ", "))})
			case dtype == "bfloat16" && len(without) > 0:
				out = append(out, Violation{Rule: "vllm-dtype", Object: id(o), Message: fmt.Sprintf(
					"container %s: --dtype=bfloat16 on %s, which has no bf16: vLLM fails to start; use --dtype=float16",
					name, strings.Join(without, ", "))})
			}
		}
	}
	return out
}

// vllmWarnings reports what is not wrong but noisy: a vLLM container whose HTTP probe paths are
// written to the access log at every probe (rule vllm-access-log; neither
// --disable-uvicorn-access-log nor --disable-access-log-for-endpoints covering them). An image
// without a digest is rule image-digest's, as every image.
func vllmWarnings(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, o := range objs {
		pod := podTemplate(o)
		if pod == nil {
			continue
		}
		for _, c := range vllmContainers(pod) {
			name, _, _ := unstructured.NestedString(c, "name")
			if logged := loggedProbePaths(c); len(logged) > 0 {
				out = append(out, Violation{Rule: "vllm-access-log", Object: id(o), Message: fmt.Sprintf(
					"container %s: every probe of %s is an access log line; add --disable-access-log-for-endpoints=%s (vLLM >= 0.16)",
					name, strings.Join(logged, ", "), strings.Join(logged, ","))})
			}
		}
	}
	return out
}

// loggedProbePaths returns the HTTP probe paths of a vLLM container that its access log records.
func loggedProbePaths(c map[string]any) []string {
	fl := containerFlags(c)
	if _, ok := fl["--disable-uvicorn-access-log"]; ok {
		return nil
	}
	off := strings.Split(fl["--disable-access-log-for-endpoints"], ",")
	var out []string
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		p, ok, _ := unstructured.NestedString(c, probe, "httpGet", "path")
		if ok && !slices.Contains(off, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
