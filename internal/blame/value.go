package blame

import (
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// valueAt returns the value at p in obj (an object as JSON decodes it): map fields by name, list
// items by key, position or value.
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
			item, ok := findItem(cur, func(v any) bool { return keyMatches(v, *pe.Key) })
			if !ok {
				return nil, false
			}
			cur = item
		case pe.Index != nil:
			l, ok := cur.([]any)
			if !ok || *pe.Index < 0 || *pe.Index >= len(l) {
				return nil, false
			}
			cur = l[*pe.Index]
		case pe.Value != nil:
			want := *pe.Value
			item, ok := findItem(cur, func(v any) bool { return value.Equals(value.NewValueInterface(v), want) })
			if !ok {
				return nil, false
			}
			cur = item
		default:
			return nil, false
		}
	}
	return cur, true
}

func findItem(list any, match func(any) bool) (any, bool) {
	l, ok := list.([]any)
	if !ok {
		return nil, false
	}
	for _, v := range l {
		if match(v) {
			return v, true
		}
	}
	return nil, false
}

// keyMatches says whether a list item has every key field of key.
func keyMatches(item any, key value.FieldList) bool {
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	for _, f := range key {
		v, ok := m[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}
