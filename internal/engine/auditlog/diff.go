package auditlog

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// diffResponses lists the leaf fields that differ from before to after, paths as the drift report
// spells them: maps by key, lists the schema keys (containers, env) by their keys, other lists
// whole. It walks the decoded objects with the schema beside them rather than building typed
// values, which costs a hundred times more per write.
func diffResponses(before, after map[string]any, pt *typed.ParseableType, intern func(string) string) []drift.FieldChange {
	d := differ{intern: intern}
	d.walk(before, after, rootNode(pt))
	sort.Slice(d.out, func(i, j int) bool { return d.out[i].Path < d.out[j].Path })
	return d.out
}

// differ walks two values side by side; path is where it is (built into a fieldpath.Path only
// for a difference).
type differ struct {
	out    []drift.FieldChange
	path   []step
	intern func(string) string
}

// step is one element of the path walked: a field name, or a keyed list item.
type step struct {
	name string
	item map[string]any
	keys []string
}

func (d *differ) add(from, to any, change string) {
	if len(d.out) > maxChanges { // one more than kept: hold marks the write's changes truncated
		return
	}
	p := make(fieldpath.Path, len(d.path))
	for i, s := range d.path {
		if s.item != nil {
			p[i] = keyElement(s.item, s.keys)
		} else {
			p[i] = fieldpath.PathElement{FieldName: &d.path[i].name}
		}
	}
	path := drift.Display(p)
	if d.intern != nil {
		path = d.intern(path)
	}
	d.out = append(d.out, drift.FieldChange{Path: path, From: capValue(from), To: capValue(to), Change: change})
}

func (d *differ) walk(a, b any, n node) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			d.maps(av, bv, n)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			if keys := n.listKeys(); keys != nil {
				if ia, ok := byKey(av, keys); ok {
					if ib, ok := byKey(bv, keys); ok {
						d.lists(av, ia, bv, ib, keys, n.item())
						return
					}
				}
			}
		}
	case string:
		if bv, ok := b.(string); ok && av == bv {
			return
		}
	case int64:
		if bv, ok := b.(int64); ok && av == bv {
			return
		}
	case bool:
		if bv, ok := b.(bool); ok && av == bv {
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		d.add(a, b, drift.Changed)
	}
}

func (d *differ) maps(a, b map[string]any, n node) {
	for k, av := range a {
		d.path = append(d.path, step{name: k})
		if bv, ok := b[k]; ok {
			d.walk(av, bv, n.field(k))
		} else {
			d.add(av, nil, drift.Removed)
		}
		d.path = d.path[:len(d.path)-1]
	}
	for k, bv := range b {
		if _, ok := a[k]; !ok {
			d.path = append(d.path, step{name: k})
			d.add(nil, bv, drift.Added)
			d.path = d.path[:len(d.path)-1]
		}
	}
}

// lists compares the items of two keyed lists by key, in after's order then the removed ones.
func (d *differ) lists(a []any, ia map[string]int, b []any, ib map[string]int, keys []string, n node) {
	for _, item := range b {
		m := item.(map[string]any)
		d.path = append(d.path, step{item: m, keys: keys})
		if i, ok := ia[keyOf(m, keys)]; ok {
			d.walk(a[i], item, n)
		} else {
			d.add(nil, item, drift.Added)
		}
		d.path = d.path[:len(d.path)-1]
	}
	for _, item := range a {
		m := item.(map[string]any)
		if _, ok := ib[keyOf(m, keys)]; !ok {
			d.path = append(d.path, step{item: m, keys: keys})
			d.add(item, nil, drift.Removed)
			d.path = d.path[:len(d.path)-1]
		}
	}
}

// byKey indexes a keyed list's items; false when an item is not a map, lacks a key or repeats
// another's (then the list is compared whole).
func byKey(l []any, keys []string) (map[string]int, bool) {
	out := make(map[string]int, len(l))
	for i, item := range l {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				return nil, false
			}
		}
		k := keyOf(m, keys)
		if _, dup := out[k]; dup {
			return nil, false
		}
		out[k] = i
	}
	return out, true
}

func keyOf(m map[string]any, keys []string) string {
	if len(keys) == 1 {
		if s, ok := m[keys[0]].(string); ok {
			return s
		}
	}
	var b strings.Builder
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			b.WriteString(strconv.Quote(v))
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		default:
			b.WriteString(fmt.Sprint(v))
		}
		b.WriteByte(0)
	}
	return b.String()
}

func keyElement(m map[string]any, keys []string) fieldpath.PathElement {
	nv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		nv = append(nv, k, m[k])
	}
	return fieldpath.PathElement{Key: fieldpath.KeyByFields(nv...)}
}

// node follows a value through a structured-merge-diff schema; the zero node knows no type
// (maps by key, lists whole).
type node struct {
	s  *smdschema.Schema
	tr smdschema.TypeRef
	ok bool
}

func rootNode(pt *typed.ParseableType) node {
	if pt == nil || pt.Schema == nil {
		return node{}
	}
	return node{s: pt.Schema, tr: pt.TypeRef, ok: true}
}

func (n node) atom() (smdschema.Atom, bool) {
	if !n.ok {
		return smdschema.Atom{}, false
	}
	return n.s.Resolve(n.tr)
}

func (n node) field(name string) node {
	a, ok := n.atom()
	if !ok || a.Map == nil {
		return node{}
	}
	if f, ok := a.Map.FindField(name); ok {
		return node{s: n.s, tr: f.Type, ok: true}
	}
	return node{s: n.s, tr: a.Map.ElementType, ok: true}
}

func (n node) item() node {
	a, ok := n.atom()
	if !ok || a.List == nil {
		return node{}
	}
	return node{s: n.s, tr: a.List.ElementType, ok: true}
}

// listKeys are the keys of an associative list of maps (nil for any other list).
func (n node) listKeys() []string {
	a, ok := n.atom()
	if !ok || a.List == nil || a.List.ElementRelationship != smdschema.Associative || len(a.List.Keys) == 0 {
		return nil
	}
	return a.List.Keys
}
