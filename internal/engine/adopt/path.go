package adopt

import (
	"fmt"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

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
	if len(out) == 0 {
		return nil, fmt.Errorf("whole-object path")
	}
	return out, nil
}

// hasKey says whether a path goes through a list item addressed by its keys.
func hasKey(els []pathElem) bool {
	for _, e := range els {
		if e.key != nil {
			return true
		}
	}
	return false
}

// patchValue is what the strategic-merge patch says at a drifted field: nothing (null, which
// deletes the field; a keyed list item becomes {keys, $patch: delete}) for a removed field, else
// the live value. A changed map also deletes the keys Git has and the cluster has not: a patch
// merges maps, so leaving them out would keep them.
func patchValue(f drift.Field) any {
	if f.Change == drift.Removed {
		return nil
	}
	live, ok := f.Live.(map[string]any)
	desired, ok2 := f.Desired.(map[string]any)
	if !ok || !ok2 {
		return f.Live
	}
	out := make(map[string]any, len(live))
	for k, v := range live {
		out[k] = v
	}
	for k := range desired {
		if _, ok := live[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// put sets v at els below node, creating maps and keyed list entries as needed, and returns the
// new node. Setting a keyed item to nil makes it a deletion directive; setting a value on an item
// that was one makes it an ordinary item again (a later drift undoing an earlier removal).
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
			list = append(list, keyOnly(e.key))
			idx = len(list) - 1
		}
		item := list[idx].(map[string]any)
		if len(rest) == 0 {
			switch lm := v.(type) {
			case nil:
				item = keyOnly(e.key)
				item["$patch"] = "delete"
			case map[string]any:
				delete(item, "$patch")
				for k, x := range lm {
					item[k] = x
				}
			default:
				return nil, fmt.Errorf("keyed item is not an object")
			}
			list[idx] = item
			return list, nil
		}
		if item["$patch"] == "delete" { // its fields come back: no longer deleted
			delete(item, "$patch")
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

// keyOnly is a list item holding only its key fields.
func keyOnly(key map[string]any) map[string]any {
	m := make(map[string]any, len(key))
	for k, v := range key {
		m[k] = v
	}
	return m
}

func matches(m, key map[string]any) bool {
	for k, v := range key {
		if fmt.Sprint(m[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// valueAt returns the value at a field's path in an object, and whether it is there.
func valueAt(obj map[string]any, f drift.Field) (any, bool) {
	els, err := pathElems(f)
	if err != nil {
		return nil, false
	}
	return valueAtElems(obj, els)
}

func valueAtElems(obj map[string]any, els []pathElem) (any, bool) {
	var cur any = obj
	for _, e := range els {
		switch {
		case e.key != nil:
			list, _ := cur.([]any)
			var next any
			for _, it := range list {
				if m, ok := it.(map[string]any); ok && matches(m, e.key) {
					next = m
				}
			}
			if next == nil {
				return nil, false
			}
			cur = next
		case e.value != nil:
			list, _ := cur.([]any)
			var next any
			for _, it := range list {
				if fmt.Sprint(it) == *e.value {
					next = it
				}
			}
			if next == nil {
				return nil, false
			}
			cur = next
		case e.index >= 0:
			list, _ := cur.([]any)
			if e.index >= len(list) {
				return nil, false
			}
			cur = list[e.index]
		default:
			m, _ := cur.(map[string]any)
			v, ok := m[e.field]
			if !ok {
				return nil, false
			}
			cur = v
		}
	}
	return cur, true
}

// deleteAt removes what els address in obj (a list item by index is set to nil, so the others
// keep their places); nothing when it is not there.
func deleteAt(obj map[string]any, els []pathElem) {
	parent, ok := valueAtElems(obj, els[:len(els)-1])
	if !ok {
		return
	}
	e := els[len(els)-1]
	switch p := parent.(type) {
	case map[string]any:
		if e.key == nil && e.value == nil && e.index < 0 {
			delete(p, e.field)
		}
	case []any:
		for i, it := range p {
			m, isMap := it.(map[string]any)
			switch {
			case e.index == i, e.key != nil && isMap && matches(m, e.key), e.value != nil && fmt.Sprint(it) == *e.value:
				p[i] = nil
			}
		}
	}
}
