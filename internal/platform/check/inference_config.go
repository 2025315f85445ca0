package check

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// More of rule inference-pool: the picker's own flags (its pool, its gRPC port) and the
// configuration file it reads at start. Any of them wrong, the picker does not start or serves
// another pool, and every request of the pool fails.

// eppPluginTypes are the plugin types the endpoint picker v1.5.0 registers (module
// sigs.k8s.io/gateway-api-inference-extension v1.5.0, cmd/epp/runner/runner.go), the release
// base/vllm/picker.yaml pins. A config naming another type stops the picker at start ("plugin
// type '...' is not registered"). Update the list with the image.
var eppPluginTypes = []string{
	"approx-prefix-cache-producer", "concurrency-detector", "core-metrics-extractor",
	"destination-endpoint-served-verifier", "edf-ordering-policy", "endpoint-notification-source",
	"fcfs-ordering-policy", "global-strict-fairness-policy", "header-based-testing-filter",
	"inflight-load-producer", "k8s-notification-source", "kv-cache-utilization-scorer",
	"latency-scorer", "latency-slo-admitter", "lora-affinity-scorer", "max-score-picker",
	"metrics-data-source", "openai-parser", "passthrough-parser", "predicted-latency-producer",
	"predicted-latency-scorer", "prefix-cache-affinity-filter", "prefix-cache-scorer",
	"queue-scorer", "random-picker", "request-attribute-reporter", "round-robin-fairness-policy",
	"running-requests-size-scorer", "single-profile-handler", "slo-deadline-ordering-policy",
	"slo-headroom-tier-filter", "static-usage-limit-policy", "token-load-scorer",
	"utilization-detector", "vllmgrpc-parser", "weighted-random-picker",
}

// eppFeatureGates are the feature gates the endpoint picker v1.5.0 registers (same file).
var eppFeatureGates = []string{"dataLayer", "enableLegacyMetrics", "flowControl"}

// eppDefaultGRPCPort is the picker's ext_proc port without --grpc-port (v1.5.0).
const eppDefaultGRPCPort = 9002

// eppConfig is the part of the picker's EndpointPickerConfig the rule reads.
type eppConfig struct {
	FeatureGates []string `json:"featureGates"`
	Plugins      []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"plugins"`
	SchedulingProfiles []struct {
		Name    string `json:"name"`
		Plugins []struct {
			PluginRef string `json:"pluginRef"`
		} `json:"plugins"`
	} `json:"schedulingProfiles"`
	SaturationDetector *struct {
		PluginRef string `json:"pluginRef"`
	} `json:"saturationDetector"`
}

// pickerContainerProblems checks the picker container c of Deployment d behind pool: it names
// the pool and its namespace, listens for ext_proc where the pool's Service port leads, and
// reads a configuration the v1.5.0 picker accepts.
func pickerContainerProblems(pool, svc, d *unstructured.Unstructured, c map[string]any, objs []*unstructured.Unstructured) []string {
	args := flags(c["args"])
	var out []string
	if got, ok := args["--pool-name"]; !ok {
		out = append(out, fmt.Sprintf("its endpoint picker %s has no --pool-name: it serves no pool", id(d)))
	} else if got != pool.GetName() {
		out = append(out, fmt.Sprintf("its endpoint picker %s serves --pool-name=%s, not %s: it picks among another pool's pods", id(d), got, pool.GetName()))
	}
	if ns := pickerNamespace(args, c, d); ns != pool.GetNamespace() {
		out = append(out, fmt.Sprintf("its endpoint picker %s serves --pool-namespace=%s (without the flag: env NAMESPACE, else default), not %s: it picks among another pool's pods",
			id(d), ns, pool.GetNamespace()))
	}
	grpc := strconv.Itoa(eppDefaultGRPCPort)
	if v, ok := args["--grpc-port"]; ok {
		grpc = v
	}
	if target, ok := pickerTargetPort(pool, svc, c); ok && target != grpc {
		out = append(out, fmt.Sprintf("its endpoint picker %s leads to container port %s of %s, but the picker listens for ext_proc on %s (--grpc-port): every request of the pool fails",
			id(svc), target, id(d), grpc))
	}
	gates, read, msgs := pickerConfig(args, c, d, objs)
	out = append(out, msgs...)
	if read && !slices.Contains(gates, "flowControl") && slices.ContainsFunc(poolObjectives(pool, objs), func(o *unstructured.Unstructured) bool { return priority(o) < 0 }) {
		out = append(out, fmt.Sprintf("has objectives below priority 0, but its endpoint picker %s runs without feature gate flowControl: a saturated pool drops them instead of queuing them", id(d)))
	}
	return out
}

// pickerNamespace is the namespace the picker watches: --pool-namespace, else env NAMESPACE
// (a value or the pod's own namespace), else default.
func pickerNamespace(args map[string]string, c map[string]any, d *unstructured.Unstructured) string {
	if v, ok := args["--pool-namespace"]; ok && v != "" {
		return v
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range env {
		m := asMap(e)
		if m["name"] != "NAMESPACE" {
			continue
		}
		if v, _ := m["value"].(string); v != "" {
			return v
		}
		if f, _, _ := unstructured.NestedString(m, "valueFrom", "fieldRef", "fieldPath"); f == "metadata.namespace" {
			return d.GetNamespace()
		}
	}
	return "default"
}

// pickerTargetPort is the container port of c that the Service port the pool names leads to.
func pickerTargetPort(pool, svc *unstructured.Unstructured, c map[string]any) (string, bool) {
	want, _, _ := unstructured.NestedInt64(pool.Object, "spec", "endpointPickerRef", "port", "number")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, p := range ports {
		m := asMap(p)
		n, _, _ := unstructured.NestedInt64(m, "port")
		if n != want {
			continue
		}
		target, ok := m["targetPort"]
		if !ok {
			return fmt.Sprint(n), true
		}
		if name, isName := target.(string); isName {
			if _, err := strconv.Atoi(name); err == nil {
				return name, true
			}
			cports, _, _ := unstructured.NestedSlice(c, "ports")
			for _, cp := range cports {
				if asMap(cp)["name"] == name {
					return fmt.Sprint(asMap(cp)["containerPort"]), true
				}
			}
			return "named " + name + " (none)", true
		}
		return fmt.Sprint(target), true
	}
	return "", false
}

// pickerConfig reads the file of --config-file from the ConfigMap mounted at its directory and
// checks it as the v1.5.0 picker does at start: known plugin types and feature gates, every
// pluginRef defined. It returns the feature gates the picker runs with, and whether it could
// read them (without --config-file, none).
func pickerConfig(args map[string]string, c map[string]any, d *unstructured.Unstructured, objs []*unstructured.Unstructured) (gates []string, read bool, msgs []string) {
	file, ok := args["--config-file"]
	if !ok {
		return nil, true, nil
	}
	text, why := mountedConfigMapFile(file, c, d, objs)
	if why != "" {
		return nil, false, []string{fmt.Sprintf("its endpoint picker %s reads --config-file=%s, %s: the picker does not start", id(d), file, why)}
	}
	var cfg eppConfig
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		return nil, false, []string{fmt.Sprintf("its endpoint picker %s reads --config-file=%s, which does not parse (%v): the picker does not start", id(d), file, err)}
	}
	var out []string
	bad := func(format string, a ...any) {
		out = append(out, fmt.Sprintf("the configuration of its endpoint picker %s (%s) ", id(d), file)+fmt.Sprintf(format, a...)+": the picker does not start")
	}
	for _, g := range cfg.FeatureGates {
		if !slices.Contains(eppFeatureGates, g) {
			bad("turns on feature gate %q, which picker v1.5.0 does not know (%s)", g, strings.Join(eppFeatureGates, ", "))
		}
	}
	defined := map[string]bool{}
	for _, p := range cfg.Plugins {
		if !slices.Contains(eppPluginTypes, p.Type) {
			bad("names plugin type %q, which picker v1.5.0 does not register", p.Type)
		}
		name := p.Name
		if name == "" {
			name = p.Type
		}
		defined[name] = true
	}
	for _, prof := range cfg.SchedulingProfiles {
		for _, ref := range prof.Plugins {
			if !defined[ref.PluginRef] {
				bad("has profile %s refer to plugin %q, which its plugins do not define", prof.Name, ref.PluginRef)
			}
		}
	}
	if s := cfg.SaturationDetector; s != nil && !defined[s.PluginRef] {
		bad("has the saturation detector refer to plugin %q, which its plugins do not define", s.PluginRef)
	}
	return cfg.FeatureGates, true, out
}

// mountedConfigMapFile is the content of file in container c of d: the key of its base name in
// the rendered ConfigMap mounted at its directory. Otherwise why says what is missing.
func mountedConfigMapFile(file string, c map[string]any, d *unstructured.Unstructured, objs []*unstructured.Unstructured) (text, why string) {
	dir, key := path.Dir(file), path.Base(file)
	mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	var volume string
	for _, m := range mounts {
		mp, _ := asMap(m)["mountPath"].(string)
		if strings.TrimSuffix(mp, "/") == dir {
			volume, _ = asMap(m)["name"].(string)
		}
	}
	if volume == "" {
		return "", "but no volume is mounted at " + dir
	}
	vols, _, _ := unstructured.NestedSlice(podTemplate(d), "volumes")
	var cm string
	for _, v := range vols {
		if asMap(v)["name"] == volume {
			cm, _, _ = unstructured.NestedString(asMap(v), "configMap", "name")
		}
	}
	if cm == "" {
		return "", "but volume " + volume + " at " + dir + " is no ConfigMap"
	}
	for _, o := range objects(objs, schema.GroupKind{Kind: "ConfigMap"}) {
		if o.GetNamespace() != d.GetNamespace() || o.GetName() != cm {
			continue
		}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		if v, ok := data[key]; ok {
			return v, ""
		}
		return "", fmt.Sprintf("but ConfigMap %s/%s mounted at %s has no key %s", o.GetNamespace(), cm, dir, key)
	}
	return "", fmt.Sprintf("but ConfigMap %s/%s mounted at %s is not rendered", d.GetNamespace(), cm, dir)
}

// poolObjectives are the rendered InferenceObjectives whose poolRef is pool.
func poolObjectives(pool *unstructured.Unstructured, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objects(objs, inferenceObjectiveGK) {
		name, _, _ := unstructured.NestedString(o.Object, "spec", "poolRef", "name")
		if o.GetNamespace() == pool.GetNamespace() && name == pool.GetName() {
			out = append(out, o)
		}
	}
	return out
}

// priority is an objective's spec.priority (0 without it).
func priority(o *unstructured.Unstructured) int64 {
	p, _, _ := unstructured.NestedInt64(o.Object, "spec", "priority")
	return p
}

// isPickerContainer says whether a container runs the endpoint picker: named epp, or its image is.
func isPickerContainer(c map[string]any) bool {
	name, _ := c["name"].(string)
	image, _ := c["image"].(string)
	return name == "epp" || strings.Contains(image, "/epp:") || strings.Contains(image, "/epp@")
}
