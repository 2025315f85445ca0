package drift

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// FieldPath is a structured field path: structured-merge-diff's fieldpath.Path, the form the API
// server's field management uses. Its JSON form is the list of elements as managedFields spells
// them ("f:spec", "k:{\"name\":\"vllm\"}", "v:\"x\"", "i:0"), so a consumer never parses the
// display string.
type FieldPath fieldpath.Path

// MarshalJSON writes the elements in managedFields' serialisation.
func (p FieldPath) MarshalJSON() ([]byte, error) {
	out := make([]string, len(p))
	for i, pe := range p {
		s, err := fieldpath.SerializePathElement(pe)
		if err != nil {
			return nil, fmt.Errorf("field path %s: %w", Display(fieldpath.Path(p)), err)
		}
		out[i] = s
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the elements back.
func (p *FieldPath) UnmarshalJSON(b []byte) error {
	var parts []string
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	out := make(FieldPath, len(parts))
	for i, s := range parts {
		pe, err := fieldpath.DeserializePathElement(s)
		if err != nil {
			return fmt.Errorf("field path element %q: %w", s, err)
		}
		out[i] = pe
	}
	*p = out
	return nil
}

// Display renders a path the way people read it: .metadata.labels.team,
// .spec.template.spec.containers[name=vllm].env[name=LOG_LEVEL], .spec.rules[0].backendRefs[1],
// ports[port=53,protocol=UDP]; map keys that are not identifiers are quoted:
// .metadata.annotations["a/b"].
func Display(p fieldpath.Path) string {
	var b strings.Builder
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			if isIdent(*pe.FieldName) {
				b.WriteString("." + *pe.FieldName)
			} else {
				b.WriteString("[" + strconv.Quote(*pe.FieldName) + "]")
			}
		case pe.Key != nil:
			parts := make([]string, 0, len(*pe.Key))
			for _, f := range *pe.Key {
				parts = append(parts, fmt.Sprintf("%s=%v", f.Name, f.Value.Unstructured()))
			}
			sort.Strings(parts)
			b.WriteString("[" + strings.Join(parts, ",") + "]")
		case pe.Value != nil:
			b.WriteString(fmt.Sprintf("[%v]", (*pe.Value).Unstructured()))
		case pe.Index != nil:
			b.WriteString(fmt.Sprintf("[%d]", *pe.Index))
		}
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// pointerPrefix renders the leading map-field part of p as an RFC 6901 pointer (up to the first
// list element), for matching controller rules written as JSON pointers.
func pointerPrefix(p fieldpath.Path) string {
	var b strings.Builder
	for _, pe := range p {
		if pe.FieldName == nil {
			break
		}
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(*pe.FieldName, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// pointerCovers reports whether the pointer rule is p or one of its ancestors. A rule that reaches
// into a list cannot be matched by pointer and covers nothing.
func pointerCovers(rule string, p fieldpath.Path) bool {
	ptr := pointerPrefix(p)
	rule = strings.TrimSuffix(rule, "/")
	return ptr == rule || strings.HasPrefix(ptr, rule+"/")
}

// Path returns the structured path.
func (p FieldPath) Path() fieldpath.Path { return fieldpath.Path(p) }

// valueAt follows p inside obj. A key element matches the list item whose key fields equal it;
// a key field the item leaves out (a defaulted protocol, say) is not held against it.
func valueAt(obj any, p fieldpath.Path) (any, bool) {
	cur := obj
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[*pe.FieldName]; !ok {
				return nil, false
			}
		case pe.Key != nil:
			l, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			found := false
			for _, it := range l {
				if keyMatches(it, *pe.Key) {
					cur, found = it, true
					break
				}
			}
			if !found {
				return nil, false
			}
		case pe.Value != nil:
			l, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			want := (*pe.Value).Unstructured()
			found := false
			for _, it := range l {
				if scalarEqual(it, want, false) || value.Equals(value.NewValueInterface(it), *pe.Value) {
					cur, found = it, true
					break
				}
			}
			if !found {
				return nil, false
			}
		case pe.Index != nil:
			l, ok := cur.([]any)
			if !ok || *pe.Index < 0 || *pe.Index >= len(l) {
				return nil, false
			}
			cur = l[*pe.Index]
		}
	}
	return cur, true
}

func keyMatches(item any, key value.FieldList) bool {
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	present := 0
	for _, f := range key {
		v, ok := m[f.Name]
		if !ok {
			continue
		}
		present++
		if !scalarEqual(v, f.Value.Unstructured(), false) {
			return false
		}
	}
	return present > 0
}

// minimal keeps the paths of a set that no other member of the set contains.
func minimal(s *fieldpath.Set) []fieldpath.Path {
	var out []fieldpath.Path
	s.Iterate(func(p fieldpath.Path) {
		for i := 1; i < len(p); i++ {
			if s.Has(p[:i]) {
				return
			}
		}
		out = append(out, p.Copy())
	})
	return out
}

// ValueAt returns the value at p in obj (an object as JSON decodes it) and whether it is there.
func ValueAt(obj map[string]any, p FieldPath) (any, bool) { return valueAt(obj, p.Path()) }
