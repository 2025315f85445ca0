package render

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var update = flag.Bool("update", false, "rewrite golden files")

var envs = []string{"dev", "staging", "prod"}

func renderRepo(t testing.TB, env string) *Result {
	t.Helper()
	src, err := FromDir("../../..")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Engine{}.Render(context.Background(), src, Target{Name: env})
	if err != nil {
		t.Fatalf("render %s: %v", env, err)
	}
	return res
}

// podTemplate returns the pod template of a workload, the object itself for a Pod, nil otherwise.
func podTemplate(o *unstructured.Unstructured) map[string]any {
	var path []string
	switch o.GetKind() {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		path = []string{"spec", "template"}
	case "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template"}
	case "Pod":
		return o.Object
	default:
		return nil
	}
	m, _, _ := unstructured.NestedMap(o.Object, path...)
	return m
}

func id(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func gpuCount(pod map[string]any, field string) (int64, bool) {
	var total int64
	var found bool
	cs, _, _ := unstructured.NestedSlice(pod, "spec", "containers")
	for _, c := range cs {
		v, ok, _ := unstructured.NestedFieldNoCopy(c.(map[string]any), "resources", field, "nvidia.com/gpu")
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(fmt.Sprint(v))
		if err == nil {
			total += q.Value()
			found = true
		}
	}
	return total, found
}

func toleratesGPU(pod map[string]any) bool {
	ts, _, _ := unstructured.NestedSlice(pod, "spec", "tolerations")
	for _, t := range ts {
		m := t.(map[string]any)
		if m["key"] == "nvidia.com/gpu" && (m["effect"] == "NoSchedule" || m["effect"] == nil) {
			return true
		}
		if m["key"] == nil && m["operator"] == "Exists" {
			return true
		}
	}
	return false
}

// requiredAffinity returns the values of a required node-affinity expression on key.
func requiredAffinity(pod map[string]any, key string) []string {
	terms, _, _ := unstructured.NestedSlice(pod, "spec", "affinity", "nodeAffinity",
		"requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	var vals []string
	for _, term := range terms {
		exprs, _, _ := unstructured.NestedSlice(term.(map[string]any), "matchExpressions")
		for _, e := range exprs {
			m := e.(map[string]any)
			if m["key"] == key && m["operator"] == "In" {
				vs, _, _ := unstructured.NestedStringSlice(m, "values")
				vals = append(vals, vs...)
			}
		}
	}
	return vals
}

func gpuCard(t *testing.T, objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if o.GetKind() == "NodePool" && o.GetName() == "gpu" {
			card, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "labels", "accelerator")
			return card
		}
	}
	t.Fatal("no gpu NodePool")
	return ""
}

func TestOverlaysKeepGPURules(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			res := renderRepo(t, env)
			card := gpuCard(t, res.Objects)
			if card == "" {
				t.Fatal("gpu NodePool has no accelerator label")
			}
			for _, o := range res.Objects {
				pod := podTemplate(o)
				if pod == nil {
					continue
				}
				limit, inLimits := gpuCount(pod, "limits")
				request, inRequests := gpuCount(pod, "requests")
				agent := o.GetKind() == "DaemonSet" // node agents (policies/gpu-taint-only-gpu-pods.yaml)
				switch {
				case inLimits || inRequests:
					if !inLimits {
						t.Errorf("%s: nvidia.com/gpu in requests but not in limits", id(o))
					}
					if inRequests && request != limit {
						t.Errorf("%s: nvidia.com/gpu requests %d != limits %d", id(o), request, limit)
					}
					if !toleratesGPU(pod) {
						t.Errorf("%s: asks for a GPU but does not tolerate nvidia.com/gpu", id(o))
					}
					if got := requiredAffinity(pod, "accelerator"); !cmp.Equal(got, []string{card}) {
						t.Errorf("%s: required affinity on accelerator = %v, want [%s]", id(o), got, card)
					}
				case toleratesGPU(pod) && !agent:
					t.Errorf("%s: tolerates the GPU taint without asking for a GPU", id(o))
				}
			}
		})
	}
}

func TestOverlaysWorkloadRules(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			res := renderRepo(t, env)
			priorities := map[string]int64{}
			gpuWorkloads := map[string]bool{}
			for _, o := range res.Objects {
				if o.GetKind() == "PriorityClass" {
					v, _, _ := unstructured.NestedInt64(o.Object, "value")
					priorities[o.GetName()] = v
				}
				pod := podTemplate(o)
				if pod == nil {
					continue
				}
				if _, ok := gpuCount(pod, "limits"); ok {
					gpuWorkloads[o.GetKind()+"/"+o.GetName()] = true
				}
				cs, _, _ := unstructured.NestedSlice(pod, "spec", "containers")
				ics, _, _ := unstructured.NestedSlice(pod, "spec", "initContainers")
				for _, c := range append(cs, ics...) {
					img, _ := c.(map[string]any)["image"].(string)
					if !pinned(img) {
						t.Errorf("%s: image %q is not pinned to a tag or digest", id(o), img)
					}
				}
				if strings.HasPrefix(o.GetName(), "vllm-") && o.GetKind() == "Deployment" {
					checkVLLM(t, o, pod)
				}
			}
			if !(priorities["llm-batch"] < priorities["llm-api"] && priorities["llm-api"] < priorities["llm-interactive"]) {
				t.Errorf("priorities must order batch < api < interactive, got %v", priorities)
			}
			for _, o := range res.Objects {
				switch o.GetKind() {
				case "ScaledObject":
					checkScaledObject(t, env, o, gpuWorkloads)
				case "HorizontalPodAutoscaler":
					kind, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "kind")
					name, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name")
					if gpuWorkloads[kind+"/"+name] {
						t.Errorf("%s: an HPA scales GPU workload %s", id(o), name)
					}
				case "HTTPRoute":
					checkRouteWeights(t, env, o)
				case "CronJob":
					if pc, _, _ := unstructured.NestedString(o.Object, "spec", "jobTemplate", "spec", "template", "spec", "priorityClassName"); o.GetNamespace() == "llm-batch" && pc != "llm-batch" {
						t.Errorf("%s: batch CronJob has priority class %q, want llm-batch", id(o), pc)
					}
				}
			}
		})
	}
}

func pinned(img string) bool {
	if strings.Contains(img, "@sha256:") {
		return true
	}
	slash := strings.LastIndex(img, "/")
	colon := strings.LastIndex(img, ":")
	return colon > slash && !strings.HasSuffix(img, ":latest")
}

func checkVLLM(t *testing.T, o *unstructured.Unstructured, pod map[string]any) {
	cs, _, _ := unstructured.NestedSlice(pod, "spec", "containers")
	c := cs[0].(map[string]any)
	delay, _, _ := unstructured.NestedInt64(c, "startupProbe", "initialDelaySeconds")
	period, _, _ := unstructured.NestedInt64(c, "startupProbe", "periodSeconds")
	failures, _, _ := unstructured.NestedInt64(c, "startupProbe", "failureThreshold")
	if period == 0 {
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	if budget := delay + failures*period; budget < 360 {
		t.Errorf("%s: startupProbe budget %ds < 360s worst cold start", id(o), budget)
	}
	args := strings.Join(mustStrings(c["args"]), " ")
	for _, a := range []string{"--served-model-name", "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs", "--enable-prefix-caching"} {
		if !strings.Contains(args, a) {
			t.Errorf("%s: vLLM args lack %s", id(o), a)
		}
	}
	for _, a := range []string{"platform.llm/model", "platform.llm/weights-uri", "platform.llm/weights-revision"} {
		if o.GetAnnotations()[a] == "" {
			t.Errorf("%s: missing ledger annotation %s", id(o), a)
		}
	}
}

func mustStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func checkScaledObject(t *testing.T, env string, o *unstructured.Unstructured, gpu map[string]bool) {
	target, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name")
	triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
	for _, tr := range triggers {
		typ := tr.(map[string]any)["type"]
		if gpu["Deployment/"+target] && (typ == "cpu" || typ == "memory") {
			t.Errorf("%s: GPU workload %s scales on %v", id(o), target, typ)
		}
		q, _, _ := unstructured.NestedString(tr.(map[string]any), "metadata", "query")
		if strings.Contains(q, "vllm:") && strings.Contains(q, "{model=") {
			t.Errorf("%s: vLLM series are labelled model_name, not model: %s", id(o), q)
		}
	}
	if env == "prod" && strings.HasPrefix(target, "vllm-") {
		minR, ok, _ := unstructured.NestedInt64(o.Object, "spec", "minReplicaCount")
		if !ok || minR < 1 {
			t.Errorf("%s: prod inference minReplicaCount %d, want >= 1", id(o), minR)
		}
		if idle, ok, _ := unstructured.NestedInt64(o.Object, "spec", "idleReplicaCount"); ok && idle == 0 {
			t.Errorf("%s: prod inference must not scale to zero when idle", id(o))
		}
	}
}

func checkRouteWeights(t *testing.T, env string, o *unstructured.Unstructured) {
	rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
	for i, r := range rules {
		refs, _, _ := unstructured.NestedSlice(r.(map[string]any), "backendRefs")
		if len(refs) < 2 && env != "prod" {
			continue
		}
		var sum int64
		for _, b := range refs {
			w, ok, _ := unstructured.NestedInt64(b.(map[string]any), "weight")
			if !ok {
				w = 1
			}
			sum += w
		}
		if sum != 100 {
			t.Errorf("%s rule %d: backend weights sum to %d, want 100", id(o), i, sum)
		}
	}
}

// summary lists, per env, the numbers that distinguish environments: a reviewer sees any change.
func summary(t *testing.T) string {
	type row struct{ key, val string }
	rows := map[string]map[string]string{}
	keys := map[string]bool{}
	for _, env := range envs {
		rows[env] = map[string]string{}
		for _, o := range renderRepo(t, env).Objects {
			add := func(k string, v any) {
				if v == nil {
					return
				}
				keys[k] = true
				rows[env][k] = fmt.Sprint(v)
			}
			name := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
			add("objects", len(rows[env]))
			switch o.GetKind() {
			case "NodePool":
				add(name+" accelerator", o.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["accelerator"])
				v, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "limits", "nvidia.com/gpu")
				add(name+" limits.gpu", v)
			case "ResourceQuota":
				v, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "hard", "requests.nvidia.com/gpu")
				add(name+" gpu", v)
			case "ScaledObject":
				mn, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "minReplicaCount")
				mx, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "maxReplicaCount")
				add(name+" min-max", fmt.Sprintf("%v-%v", mn, mx))
			case "HorizontalPodAutoscaler":
				mn, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "minReplicas")
				mx, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "maxReplicas")
				add(name+" min-max", fmt.Sprintf("%v-%v", mn, mx))
			case "Deployment", "StatefulSet", "Cluster":
				r, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
				if o.GetKind() == "Cluster" {
					r, _, _ = unstructured.NestedFieldNoCopy(o.Object, "spec", "instances")
				}
				add(name+" replicas", r)
				if rev := o.GetAnnotations()["platform.llm/weights-revision"]; rev != "" {
					add(name+" weights", o.GetAnnotations()["platform.llm/weights-uri"]+"@"+rev)
				}
			case "ObjectStore", "CronJob":
				for what, uri := range backupDestinations(o) {
					add(name+" "+what, uri)
				}
				r, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "retentionPolicy")
				add(name+" retention", r)
			case "HTTPRoute":
				rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
				var parts []string
				for _, r := range rules {
					refs, _, _ := unstructured.NestedSlice(r.(map[string]any), "backendRefs")
					for _, b := range refs {
						parts = append(parts, fmt.Sprintf("%v=%v", b.(map[string]any)["name"], b.(map[string]any)["weight"]))
					}
				}
				add(name+" backends", strings.Join(parts, ","))
			}
		}
		rows[env]["objects"] = fmt.Sprint(len(renderRepo(t, env).Objects))
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var b strings.Builder
	fmt.Fprintf(&b, "# What differs between environments (rows equal in all three are left out).\n# Regenerate: go test ./internal/engine/render -run TestEnvSummaryGolden -update\n")
	fmt.Fprintf(&b, "%-70s | %-28s | %-28s | %s\n", "field", "dev", "staging", "prod")
	for _, k := range sorted {
		d, s, p := rows["dev"][k], rows["staging"][k], rows["prod"][k]
		if d == s && s == p {
			continue
		}
		fmt.Fprintf(&b, "%-70s | %-28s | %-28s | %s\n", k, dash(d), dash(s), dash(p))
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func TestEnvSummaryGolden(t *testing.T) {
	got := summary(t)
	golden := filepath.Join("testdata", "env-summary.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("environment summary changed (-want +got); if intended, run with -update and commit:\n%s", diff)
	}
}
