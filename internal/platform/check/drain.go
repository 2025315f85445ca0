package check

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// defaultGracePeriod is the pod's terminationGracePeriodSeconds when unset.
const defaultGracePeriod = 30

// shellSleep finds the sleeps of a preStop shell script ("sleep 15", "sleep 15s").
var shellSleep = regexp.MustCompile(`(?:^|[\s;&|(])sleep\s+(\d+(?:\.\d+)?)s?(?:$|[\s;&|)])`)

// vllmDrain checks that a vLLM pod gets to drain: the kubelet counts terminationGracePeriodSeconds
// from the start of the preStop hook and kills the container when it runs out, so the grace period
// must cover the preStop sleep (the time for endpoints and the Gateway to drop the pod) plus vLLM's
// --shutdown-timeout (how long vLLM waits for in-flight requests after SIGTERM). A vLLM container
// without a positive --shutdown-timeout is a violation too: its default, 0, aborts what is in
// flight. So is one whose image tag is a release before v0.18, which has no such flag (the server
// refuses to start on it). A vLLM container is one whose image's repository name contains "vllm".
func vllmDrain(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	for _, o := range objs {
		pod := podTemplate(o)
		if pod == nil {
			continue
		}
		grace, ok, _ := unstructured.NestedInt64(pod, "terminationGracePeriodSeconds")
		if !ok {
			grace = defaultGracePeriod
		}
		cs, _, _ := unstructured.NestedSlice(pod, "containers")
		for _, c := range cs {
			cm := asMap(c)
			image, _, _ := unstructured.NestedString(cm, "image")
			if !isVLLMImage(image) {
				continue
			}
			name, _, _ := unstructured.NestedString(cm, "name")
			sleep, sleepFrom := preStopSleep(cm)
			shutdown, shutdownFrom := shutdownTimeout(cm)
			if shutdown <= 0 {
				out = append(out, Violation{Rule: "vllm-drain", Object: id(o), Message: fmt.Sprintf(
					"container %s: %s: vLLM aborts the requests in flight on SIGTERM; set --shutdown-timeout (vLLM >= 0.18) and a grace period covering it",
					name, shutdownFrom)})
			} else if v, ok := imageVersion(image); ok && v.less(firstShutdownTimeout) {
				out = append(out, Violation{Rule: "vllm-drain", Object: id(o), Message: fmt.Sprintf(
					"container %s: image %s predates --shutdown-timeout (vLLM v0.%d): the server refuses the unknown flag; use v0.%d or later",
					name, image, firstShutdownTimeout.minor, firstShutdownTimeout.minor)})
			}
			if need := sleep + shutdown; float64(grace) < need {
				out = append(out, Violation{Rule: "vllm-drain", Object: id(o), Message: fmt.Sprintf(
					"container %s: terminationGracePeriodSeconds %d is below the %gs vLLM needs to drain (preStop %s %gs + %s %gs): the kubelet kills it mid-request; raise the grace period to at least %g",
					name, grace, need, sleepFrom, sleep, shutdownFrom, shutdown, need)})
			}
		}
	}
	return out
}

// isVLLMImage reports whether an image reference names a vLLM image (vllm/vllm-openai:v0.11.0,
// registry.example.com/mirror/vllm-openai@sha256:...).
func isVLLMImage(image string) bool {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i] // a tag, not a registry port
	}
	return strings.Contains(strings.ToLower(path.Base(repo)), "vllm")
}

// preStopSleep returns how long a container's preStop hook sleeps: the sleep action, an exec of
// sleep, or the sleeps of an exec'd shell script (summed). Anything else counts 0.
func preStopSleep(c map[string]any) (float64, string) {
	if s, ok, _ := unstructured.NestedInt64(c, "lifecycle", "preStop", "sleep", "seconds"); ok {
		return float64(s), "sleep action"
	}
	cmd, _, _ := unstructured.NestedStringSlice(c, "lifecycle", "preStop", "exec", "command")
	if len(cmd) == 0 {
		return 0, "sleep"
	}
	if path.Base(cmd[0]) == "sleep" && len(cmd) == 2 {
		if v, err := strconv.ParseFloat(strings.TrimSuffix(cmd[1], "s"), 64); err == nil {
			return v, "exec sleep"
		}
	}
	var total float64
	for _, m := range shellSleep.FindAllStringSubmatch(strings.Join(cmd[1:], " "), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		total += v
	}
	return total, "exec sleep"
}

// shutdownTimeout reads vLLM's --shutdown-timeout (seconds) from the container's command and args.
func shutdownTimeout(c map[string]any) (float64, string) {
	v, ok := containerFlags(c)["--shutdown-timeout"]
	if !ok {
		return 0, "no --shutdown-timeout"
	}
	s, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0, fmt.Sprintf("unparsable --shutdown-timeout=%q", v)
	}
	return s, "--shutdown-timeout"
}

// vllmRelease is a vLLM release number, major.minor.
type vllmRelease struct{ major, minor int }

// firstShutdownTimeout is the first vLLM release with --shutdown-timeout (its CLI reference,
// docs.vllm.ai/en/v0.18.0/cli/serve, lists it; v0.12.0's does not).
var firstShutdownTimeout = vllmRelease{0, 18}

func (r vllmRelease) less(o vllmRelease) bool {
	return r.major < o.major || r.major == o.major && r.minor < o.minor
}

// imageVersion reads the release from an image's tag (v0.30.0, 0.18.1, v0.28.0-cu129); false for
// a digest-only reference or a tag that is not a release (latest, nightly).
func imageVersion(image string) (vllmRelease, bool) {
	ref, _, _ := strings.Cut(image, "@")
	i := strings.LastIndex(ref, ":")
	if i <= strings.LastIndex(ref, "/") {
		return vllmRelease{}, false
	}
	var r vllmRelease
	var patch int
	tag := strings.TrimPrefix(ref[i+1:], "v")
	if n, _ := fmt.Sscanf(tag, "%d.%d.%d", &r.major, &r.minor, &patch); n < 2 {
		return vllmRelease{}, false
	}
	return r, true
}
