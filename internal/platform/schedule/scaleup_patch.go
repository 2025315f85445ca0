package schedule

import (
	"fmt"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// ScaleUpPatch checks that an Application kustomize patch (spec.source.kustomize.patches, in
// its JSON form) is one of this schedule's scale-ups: a target naming only a peak target's kind,
// name (and namespace), and a patch that is one JSON 6902 replace of that field with an integer
// no higher than the peak's warm count. Anything else in that list reaches a pinned env without a
// promotion, unreviewed: an error says what it is.
func (s *Schedule) ScaleUpPatch(p map[string]any) error {
	target, _ := p["target"].(map[string]any)
	body, _ := p["patch"].(string)
	kind, _ := target["kind"].(string)
	name, _ := target["name"].(string)
	ns, _ := target["namespace"].(string)
	what := fmt.Sprintf("the patch of %s/%s", kind, name)
	for k := range p {
		if k != "target" && k != "patch" {
			return fmt.Errorf("%s has %q: a scheduled scale-up has only target and patch", what, k)
		}
	}
	for k := range target {
		if k != "kind" && k != "name" && k != "namespace" {
			return fmt.Errorf("%s selects by %q: a scheduled scale-up names its object by kind and name", what, k)
		}
	}
	var ops []patchOp
	if err := kyaml.Unmarshal([]byte(body), &ops); err != nil || len(ops) != 1 || ops[0].Op != "replace" {
		return fmt.Errorf("%s is not one JSON 6902 replace of an integer: %q", what, body)
	}
	for _, peak := range s.Peaks {
		t := peak.Target
		if t.Kind != kind || t.Name != name || (ns != "" && t.Namespace != "" && t.Namespace != ns) || fieldPointer(t.Field) != ops[0].Path {
			continue
		}
		if ops[0].Value < 0 || ops[0].Value > peak.Warm {
			return fmt.Errorf("%s sets %s to %d, outside 0..%d (peak %s's warm count)", what, ops[0].Path, ops[0].Value, peak.Warm, peak.Name)
		}
		return nil
	}
	return fmt.Errorf("%s (%s) is not the target of any peak of %s", what, ops[0].Path, s.File)
}
