package report

import (
	"fmt"
	"strings"

	"github.com/llm-gitops/platform/internal/drift"
	"sigs.k8s.io/yaml"
)

// AdoptFileName is the name of the patch file that adopts the live state of an object into an
// overlay: adopt-<kind>-<name>.yaml, kind lower-cased.
func AdoptFileName(o drift.Object) string {
	return "adopt-" + strings.ToLower(o.Kind) + "-" + o.Name + ".yaml"
}

// AdoptPatchObject builds the strategic-merge patch that makes Git say what the cluster says:
// apiVersion, kind, metadata name/namespace and, at each drifted field's path, the live value
// (changed and added fields) or null (removed fields; a removed keyed list item becomes
// {key..., $patch: delete}). List items addressed by [key=value] become list entries carrying
// the key fields. Fields the patch cannot express (list items addressed by index or by value)
// are returned as notes.
func AdoptPatchObject(o drift.Object) (patch map[string]any, notes []string) {
	meta := map[string]any{"name": o.Name}
	if o.Namespace != "" {
		meta["namespace"] = o.Namespace
	}
	var root any = map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "metadata": meta}
	for _, f := range o.Fields {
		els, err := pathElems(f)
		if err == nil && len(els) == 0 {
			err = fmt.Errorf("whole-object path")
		}
		var v any = f.Live
		if f.Change == drift.Removed {
			v = nil
		}
		if err == nil {
			var next any
			if next, err = put(root, els, v); err == nil {
				root = next
			}
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: not expressible as a strategic-merge patch (%v); edit it by hand", f.Path, err))
		}
	}
	return root.(map[string]any), notes
}

// AdoptPatch renders a unified diff that creates overlays/<env>/<AdoptFileName> holding
// AdoptPatchObject(o) and lists it under patches: of overlays/<env>/kustomization.yaml.
// kustomization is the current content of that file; when it is nil the second hunk cannot be
// placed, and the diff instead carries the lines to append to the patches: list with a note
// (it then does not apply with `git apply` as is).
func AdoptPatch(env string, o drift.Object, kustomization []byte) (string, error) {
	obj, notes := AdoptPatchObject(o)
	body, err := yaml.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("report: adopt patch for %s: %w", ObjectRef(o), err)
	}
	var fileLines []string
	for _, n := range notes {
		fileLines = append(fileLines, "# "+n)
	}
	fileLines = append(fileLines, splitLines(string(body))...)
	name := AdoptFileName(o)
	dir := "overlays/" + env + "/"
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git a/%[1]s b/%[1]s\nnew file mode 100644\n--- /dev/null\n+++ b/%[1]s\n", dir+name)
	fmt.Fprintf(&b, "@@ -0,0 +1,%d @@\n", len(fileLines))
	for _, l := range fileLines {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString(kustomizationHunk(dir+"kustomization.yaml", name, kustomization))
	return b.String(), nil
}

// kustomizationHunk renders the diff adding "- path: name" to the patches: list.
func kustomizationHunk(file, name string, content []byte) string {
	head := fmt.Sprintf("diff --git a/%[1]s b/%[1]s\n--- a/%[1]s\n+++ b/%[1]s\n", file)
	entry := "- path: " + name
	if content == nil {
		return "# " + file + " not read: append to its patches: list (create the list if missing):\n" +
			"+patches:\n+  " + entry + "\n"
	}
	lines := splitLines(string(content))
	for _, l := range lines {
		if strings.TrimSpace(l) == entry {
			return "" // already listed
		}
	}
	var add []string
	at := len(lines) // insert before lines[at]
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "patches:") {
			start = i
			break
		}
	}
	if start < 0 || strings.TrimSpace(strings.TrimPrefix(lines[start], "patches:")) != "" {
		// no block list to extend (absent, or "patches: []"): append a new list at the end.
		// A flow-style list is left alone; kustomize rejects the duplicate key, so say so.
		if start >= 0 {
			return "# " + file + " has a flow-style patches: list: add {path: " + name + "} to it by hand\n"
		}
		add = []string{"patches:", "  " + entry}
	} else {
		indent := "  "
		last := start
		for i := start + 1; i < len(lines); i++ {
			l := lines[i]
			if strings.TrimSpace(l) == "" {
				continue
			}
			if l[0] != ' ' && l[0] != '-' && l[0] != '\t' && l[0] != '#' {
				break
			}
			if l[0] == '#' {
				continue
			}
			if t := strings.TrimLeft(l, " "); strings.HasPrefix(t, "- ") && last == start {
				indent = l[:len(l)-len(t)]
			}
			last = i
		}
		at = last + 1
		add = []string{indent + entry}
	}
	from := max(0, at-3)
	to := min(len(lines), at+3)
	var b strings.Builder
	b.WriteString(head)
	oldN := to - from
	fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", hunkStart(from, oldN), oldN, from+1, oldN+len(add))
	for i := from; i < at; i++ {
		b.WriteString(" " + lines[i] + "\n")
	}
	for _, l := range add {
		b.WriteString("+" + l + "\n")
	}
	for i := at; i < to; i++ {
		b.WriteString(" " + lines[i] + "\n")
	}
	return b.String()
}

// hunkStart is the 1-based start line of a hunk, 0 for an empty range (unified diff rules).
func hunkStart(from, n int) int {
	if n == 0 {
		return from
	}
	return from + 1
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// pathElem is one step of a drift field path.
type pathElem struct {
	field string         // map field
	key   map[string]any // [k=v,...]: list item by key fields
	value *string        // [x]: set member (scalar list item)
	index int            // [n]: list index, -1 otherwise
}

// pathElems converts a field's structured path into patch steps. Reports read back from an old
// outbox may lack it: those fields cannot be adopted automatically.
func pathElems(f drift.Field) ([]pathElem, error) {
	if f.FieldPath == nil {
		return nil, fmt.Errorf("no structured path")
	}
	var out []pathElem
	for _, pe := range f.FieldPath.Path() {
		switch {
		case pe.FieldName != nil:
			out = append(out, pathElem{field: *pe.FieldName, index: -1})
		case pe.Key != nil:
			key := map[string]any{}
			for _, kf := range *pe.Key {
				key[kf.Name] = kf.Value.Unstructured()
			}
			out = append(out, pathElem{key: key, index: -1})
		case pe.Value != nil:
			v := fmt.Sprint((*pe.Value).Unstructured())
			out = append(out, pathElem{value: &v, index: -1})
		case pe.Index != nil:
			out = append(out, pathElem{index: *pe.Index})
		}
	}
	return out, nil
}

// put sets v at els below node, creating maps and keyed list entries as needed.
func put(node any, els []pathElem, v any) (any, error) {
	e := els[0]
	rest := els[1:]
	switch {
	case e.index >= 0:
		return nil, fmt.Errorf("list item addressed by index")
	case e.value != nil:
		return nil, fmt.Errorf("list item addressed by value")
	case e.key != nil:
		list, ok := node.([]any)
		if node != nil && !ok {
			return nil, fmt.Errorf("not a list")
		}
		idx := -1
		for i, it := range list {
			if m, ok := it.(map[string]any); ok && matches(m, e.key) {
				idx = i
				break
			}
		}
		if idx < 0 {
			m := map[string]any{}
			for k, kv := range e.key {
				m[k] = kv
			}
			list = append(list, m)
			idx = len(list) - 1
		}
		item := list[idx].(map[string]any)
		if len(rest) == 0 {
			if v == nil {
				item["$patch"] = "delete"
			} else if lm, ok := v.(map[string]any); ok {
				for k, x := range lm {
					item[k] = x
				}
			} else {
				return nil, fmt.Errorf("keyed item is not an object")
			}
			return list, nil
		}
		child, err := put(item, rest, v)
		if err != nil {
			return nil, err
		}
		list[idx] = child
		return list, nil
	default:
		m, ok := node.(map[string]any)
		if node != nil && !ok {
			return nil, fmt.Errorf("not an object")
		}
		if m == nil {
			m = map[string]any{}
		}
		if len(rest) == 0 {
			m[e.field] = v
			return m, nil
		}
		child, err := put(m[e.field], rest, v)
		if err != nil {
			return nil, err
		}
		m[e.field] = child
		return m, nil
	}
}

func matches(m, key map[string]any) bool {
	for k, v := range key {
		if fmt.Sprint(m[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}
