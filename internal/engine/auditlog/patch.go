package auditlog

import (
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// patchField is a field a patch body names, with the value it gives it (exact: the value is
// the field's, not a list's the path was cut at).
type patchField struct {
	path   string
	value  any
	remove bool
	exact  bool
}

// patchFields lists the fields a patch's body names: a merge or strategic merge patch's leaves
// (maps walked, lists whole, directives such as $setElementOrder left out), a JSON patch's
// operation paths cut at the first list index. ok is false when the write is not a patch or its
// body was not logged.
func patchFields(ev *auditv1.Event) (fields []patchField, ok bool) {
	if ev.Verb != "patch" || ev.RequestObject == nil || len(ev.RequestObject.Raw) == 0 {
		return nil, false
	}
	raw := ev.RequestObject.Raw
	if raw[0] == '[' {
		return jsonPatchFields(raw)
	}
	var body map[string]any
	if utiljson.Unmarshal(raw, &body) != nil {
		return nil, false
	}
	var walk func(p fieldpath.Path, v any)
	walk = func(p fieldpath.Path, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for _, k := range sortedKeys(m) {
				if !strings.HasPrefix(k, "$") {
					walk(append(p[:len(p):len(p)], fieldpath.PathElement{FieldName: &k}), m[k])
				}
			}
			return
		}
		fields = append(fields, patchField{path: drift.Display(p), value: v, remove: v == nil, exact: true})
	}
	walk(nil, diffable(body))
	return fields, true
}

// jsonPatchFields reads a JSON patch's operations (RFC 6902).
func jsonPatchFields(raw []byte) ([]patchField, bool) {
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		From  string `json:"from"`
		Value any    `json:"value"`
	}
	if utiljson.Unmarshal(raw, &ops) != nil {
		return nil, false
	}
	var out []patchField
	for _, op := range ops {
		for _, ptr := range []string{op.Path, op.From} {
			if ptr == "" || op.Op == "test" {
				continue
			}
			var p fieldpath.Path
			exact := true
			for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
				if seg == "-" || strings.Trim(seg, "0123456789") == "" {
					exact = false // a list index: the list is what is named
					break
				}
				name := strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
				p = append(p, fieldpath.PathElement{FieldName: &name})
			}
			f := patchField{path: drift.Display(p), exact: exact && ptr == op.Path && op.Op != "move", remove: op.Op == "remove"}
			if op.Op == "add" || op.Op == "replace" || op.Op == "copy" {
				f.value = op.Value
			}
			out = append(out, f)
		}
	}
	return out, true
}

// requestChanges lists what a patch body sets, for the first write seen to an object: the
// values before it are not known.
func requestChanges(ev *auditv1.Event) []drift.FieldChange {
	fields, _ := patchFields(ev)
	var out []drift.FieldChange
	for _, f := range fields {
		if !f.exact || len(out) > maxChanges || !diffablePath(f.path) { // one more than kept: truncated
			continue
		}
		c := drift.FieldChange{Path: f.path, To: capValue(f.value), Change: Set}
		if f.remove {
			c.Change = drift.Removed
		}
		out = append(out, c)
	}
	return out
}

// diffablePath says whether a path is among those diffable keeps.
func diffablePath(p string) bool {
	return !strings.HasPrefix(p, ".metadata") || strings.HasPrefix(p, ".metadata.labels") || strings.HasPrefix(p, ".metadata.annotations")
}

// inPatch keeps the changes a patch's body names (at, above or below a field it names): a change
// between two responses that the body does not name was made in between by a write the policy
// does not log (a status write moves the deployment.kubernetes.io/revision annotation).
func inPatch(changes []drift.FieldChange, fields []patchField) []drift.FieldChange {
	out := changes[:0]
	for _, c := range changes {
		for _, f := range fields {
			if under(c.Path, f.path) || under(f.path, c.Path) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// under says whether display path p is prefix or below it.
func under(p, prefix string) bool {
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	return len(p) == len(prefix) || p[len(prefix)] == '.' || p[len(prefix)] == '[' || prefix == "."
}
