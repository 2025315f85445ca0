package drift_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// FuzzCompareObject feeds the comparer random Git objects: it never panics, an object compared
// with itself never drifts, and the same object with one leaf changed always does.
func FuzzCompareObject(f *testing.F) {
	f.Add(gitDeployment, uint(0))
	f.Add(gitDeployment, uint(7))
	f.Add("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 53, protocol: UDP}, {port: 53, protocol: TCP}]}\n", uint(2))
	f.Add("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {a: [1, {b: c}], d: 1.5}\n", uint(3))
	f.Fuzz(func(t *testing.T, doc string, pick uint) {
		if len(doc) > 4096 || strings.ContainsAny(doc, "&*") {
			return // manifests, not YAML alias bombs
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
			return
		}
		obj, ok := runtime.DeepCopyJSONValue(jsonish(obj)).(map[string]any)
		if !ok {
			return
		}
		delete(obj, "status")
		opts := drift.DefaultOptions()
		opts.Schema = builtins
		d := &unstructured.Unstructured{Object: obj}
		same := drift.CompareObject(d, d.DeepCopy(), nil, &opts)
		if same != nil {
			t.Fatalf("an object compared with itself drifted: %+v", same.Fields)
		}
		live := d.DeepCopy()
		var leaves int
		countLeaves(live.Object, &leaves)
		if leaves == 0 {
			return
		}
		n := int(pick % uint(leaves))
		mutateLeaf(live.Object, &n)
		if drift.CompareObject(d, live, nil, &opts) == nil {
			t.Fatalf("a changed leaf was not reported:\ngit:  %v\nlive: %v", d.Object, live.Object)
		}
	})
}

// jsonish turns YAML values into the JSON types unstructured objects hold.
func jsonish(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = jsonish(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonish(e)
		}
		return out
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
		return x
	case int:
		return int64(x)
	case string, bool, int64, nil:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// judged reports whether a top-level field is compared (apiVersion and kind select the type).
func judged(k string) bool { return k != "apiVersion" && k != "kind" }

func countLeaves(v any, n *int) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range keysOf(x) {
			if judged(k) {
				countLeavesIn(x[k], n)
			}
		}
	}
}

func countLeavesIn(v any, n *int) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range keysOf(x) {
			countLeavesIn(x[k], n)
		}
	case []any:
		for _, e := range x {
			countLeavesIn(e, n)
		}
	case nil:
	default:
		*n++
	}
}

// mutateLeaf changes the n-th leaf (in the order countLeaves visits) to a different value.
func mutateLeaf(v any, n *int) {
	if m, ok := v.(map[string]any); ok {
		for _, k := range keysOf(m) {
			if !judged(k) {
				continue
			}
			if nv, done := mutateIn(m[k], n); done {
				m[k] = nv
				return
			}
		}
	}
}

func mutateIn(v any, n *int) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range keysOf(x) {
			if nv, done := mutateIn(x[k], n); done {
				x[k] = nv
				return x, true
			}
		}
	case []any:
		for i, e := range x {
			if nv, done := mutateIn(e, n); done {
				x[i] = nv
				return x, true
			}
		}
	case nil:
	default:
		if *n > 0 {
			*n--
			return v, false
		}
		switch y := x.(type) {
		case int64:
			return y + 1, true
		case float64:
			return y + 1, true
		case bool:
			return !y, true
		default:
			return fmt.Sprint(y) + "-changed", true
		}
	}
	return v, false
}

// keysOf returns a map's keys sorted, so a failing input picks the same leaf when replayed.
func keysOf(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// FuzzFieldPathJSON: a field path in the JSON contract (managedFields' element notation, as the
// API and the adopt patch read it) that decodes encodes back to the same elements.
func FuzzFieldPathJSON(f *testing.F) {
	f.Add(`["f:spec","f:template","f:spec","f:containers","k:{\"name\":\"vllm\"}","f:env","k:{\"name\":\"A\"}"]`)
	f.Add(`["f:spec","f:rules","i:0","f:backendRefs","i:1","f:weight"]`)
	f.Add(`["f:metadata","f:finalizers","v:\"x\""]`)
	f.Fuzz(func(t *testing.T, doc string) {
		var p drift.FieldPath
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			return
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("a decoded path does not encode: %v", err)
		}
		var back drift.FieldPath
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("an encoded path does not decode: %v\n%s", err, out)
		}
		if !back.Path().Equals(p.Path()) {
			t.Fatalf("round trip changed the path: %s → %s", drift.Display(p.Path()), drift.Display(back.Path()))
		}
	})
}
