package drift

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// elem is one step of a field path: a map field, a list item selected by key fields, a list item
// selected by its (scalar) value, or a list index.
type elem struct {
	field string
	key   map[string]any // list item whose fields equal these
	value any            // set member equal to this
	index int            // -1 unless an index
	kind  elemKind
}

type elemKind uint8

const (
	fieldElem elemKind = iota
	keyElem
	valueElem
	indexElem
)

// path is a field path inside an object, e.g. .spec.template.spec.containers[name=vllm].image.
type path []elem

func (p path) child(field string) path {
	return append(p[:len(p):len(p)], elem{field: field, kind: fieldElem, index: -1})
}

func (p path) keyed(key map[string]any) path {
	return append(p[:len(p):len(p)], elem{key: key, kind: keyElem, index: -1})
}

func (p path) indexed(i int) path {
	return append(p[:len(p):len(p)], elem{index: i, kind: indexElem})
}

// String renders the path the way people read it: .metadata.labels.team, env[name=LOG_LEVEL],
// tolerations[0]; map keys that are not identifiers are quoted: .metadata.annotations["a/b"].
func (p path) String() string {
	var b strings.Builder
	for _, e := range p {
		switch e.kind {
		case fieldElem:
			if isIdent(e.field) {
				b.WriteString("." + e.field)
			} else {
				b.WriteString("[" + strconv.Quote(e.field) + "]")
			}
		case keyElem:
			names := make([]string, 0, len(e.key))
			for k := range e.key {
				names = append(names, k)
			}
			sort.Strings(names)
			parts := make([]string, len(names))
			for i, k := range names {
				parts[i] = fmt.Sprintf("%s=%v", k, e.key[k])
			}
			b.WriteString("[" + strings.Join(parts, ",") + "]")
		case valueElem:
			b.WriteString(fmt.Sprintf("[%v]", e.value))
		case indexElem:
			b.WriteString(fmt.Sprintf("[%d]", e.index))
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

// JSONPointer renders the path as an RFC 6901 pointer where it can (keyed items cannot), for
// matching Argo CD's ignoreDifferences jsonPointers.
func (p path) JSONPointer() (string, bool) {
	var b strings.Builder
	for _, e := range p {
		switch e.kind {
		case fieldElem:
			b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(e.field, "~", "~0"), "/", "~1"))
		case indexElem:
			b.WriteString("/" + strconv.Itoa(e.index))
		default:
			return b.String(), false
		}
	}
	return b.String(), true
}

// fromFieldPath converts a managedFields path into a path.
func fromFieldPath(fp fieldpath.Path) path {
	p := make(path, 0, len(fp))
	for _, pe := range fp {
		switch {
		case pe.FieldName != nil:
			p = append(p, elem{field: *pe.FieldName, kind: fieldElem, index: -1})
		case pe.Key != nil:
			key := map[string]any{}
			for _, f := range *pe.Key {
				key[f.Name] = f.Value.Unstructured()
			}
			p = append(p, elem{key: key, kind: keyElem, index: -1})
		case pe.Value != nil:
			p = append(p, elem{value: (*pe.Value).Unstructured(), kind: valueElem, index: -1})
		case pe.Index != nil:
			p = append(p, elem{index: *pe.Index, kind: indexElem})
		}
	}
	return p
}

// lookup follows p inside obj. Key elements match a list item when every key field the item
// has equals the key's value (a key field absent from the item, typically a defaulted protocol,
// is not held against it).
func lookup(obj any, p path) (any, bool) {
	cur := obj
	for _, e := range p {
		switch e.kind {
		case fieldElem:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[e.field]; !ok {
				return nil, false
			}
		case keyElem:
			item, ok := findKeyed(cur, e.key)
			if !ok {
				return nil, false
			}
			cur = item
		case valueElem:
			l, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			found := false
			for _, it := range l {
				if scalarEqual(it, e.value) {
					cur, found = it, true
					break
				}
			}
			if !found {
				return nil, false
			}
		case indexElem:
			l, ok := cur.([]any)
			if !ok || e.index >= len(l) {
				return nil, false
			}
			cur = l[e.index]
		}
	}
	return cur, true
}

func findKeyed(list any, key map[string]any) (any, bool) {
	l, ok := list.([]any)
	if !ok {
		return nil, false
	}
	for _, it := range l {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		matched, present := true, 0
		for k, v := range key {
			iv, ok := m[k]
			if !ok {
				continue
			}
			present++
			if !scalarEqual(iv, v) {
				matched = false
				break
			}
		}
		if matched && present > 0 {
			return it, true
		}
	}
	return nil, false
}

// covers reports whether path a equals b or is a prefix of it, matching elements as lookup does.
func covers(a, b path) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if !elemMatch(a[i], b[i]) {
			return false
		}
	}
	return true
}

func elemMatch(a, b elem) bool {
	if a.kind != b.kind {
		// A keyed managedFields element may address what the desired walk calls by index only
		// when the list had no key; treat a mismatch of kinds as different.
		return false
	}
	switch a.kind {
	case fieldElem:
		return a.field == b.field
	case keyElem:
		shared := 0
		for k, v := range a.key {
			if bv, ok := b.key[k]; ok {
				shared++
				if !scalarEqual(v, bv) {
					return false
				}
			}
		}
		return shared > 0
	case valueElem:
		return scalarEqual(a.value, b.value)
	default:
		return a.index == b.index
	}
}
