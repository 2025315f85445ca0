package check

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/platform/site"
)

// digest is a pinned image's reference: @sha256: and 64 lowercase hex digits, at the end.
var digest = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// imageDigests checks that every image an env runs is pinned by digest (@sha256: and 64 hex
// digits): each container, init container and ephemeral container of a workload's pod template
// or a bare Pod, and a CloudNativePG Cluster's imageName. A tag can be re-pushed: one promoted commit would then run different bits in each
// env, and a rollback by `git revert` would not bring the old bits back. An image of an example
// registry (registry.example.com, the template's) is left to the site-values rule: the site's own
// build pins its digests once the site sets its registry.
func imageDigests(objs []*unstructured.Unstructured) []Violation {
	var out []Violation
	pinned := func(o *unstructured.Unstructured, where, image string) {
		switch {
		case image == "" || digest.MatchString(image) || len(site.Examples(image)) > 0:
		case strings.Contains(image, "@"):
			out = append(out, Violation{Rule: "image-digest", Object: id(o), Message: fmt.Sprintf(
				"%s: image %s has no sha256 digest of 64 hex digits: the kubelet cannot pull it by that digest; pin the published one (name:tag@sha256:...)",
				where, image)})
		default:
			out = append(out, Violation{Rule: "image-digest", Object: id(o), Message: fmt.Sprintf(
				"%s: image %s is pinned by tag only: a re-pushed tag runs other bits under the same commit; pin it by digest (name:tag@sha256:..., or digest: in the overlay's images)",
				where, image)})
		}
	}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "postgresql.cnpg.io", Kind: "Cluster"}) {
			image, _, _ := unstructured.NestedString(o.Object, "spec", "imageName")
			pinned(o, "imageName", image)
			continue
		}
		pod := podTemplate(o)
		if o.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Pod"}) {
			pod, _, _ = unstructured.NestedMap(o.Object, "spec")
		}
		if pod == nil {
			continue
		}
		for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
			cs, _, _ := unstructured.NestedSlice(pod, field)
			for _, c := range cs {
				m, _ := c.(map[string]any)
				name, _, _ := unstructured.NestedString(m, "name")
				image, _, _ := unstructured.NestedString(m, "image")
				pinned(o, "container "+name, image)
			}
		}
	}
	return out
}
