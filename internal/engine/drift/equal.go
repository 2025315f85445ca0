package drift

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// cursor follows a value through the schema; the zero cursor knows no types (deduced schema).
// def follows the same position in Git's object as the API server's defaulting would store it
// (nil when unknown): what it holds there is a default, not a writer's addition.
type cursor struct {
	s   *smdschema.Schema
	tr  smdschema.TypeRef
	ok  bool
	def any
}

// field steps into a map field (or a map's elements when the schema names no such field).
func (c cursor) field(name string) cursor {
	var def any
	if m, ok := c.def.(map[string]any); ok {
		def = m[name]
	}
	a, ok := c.atom()
	if !ok || a.Map == nil {
		return cursor{def: def}
	}
	if f, ok := a.Map.FindField(name); ok {
		return cursor{s: c.s, tr: f.Type, ok: true, def: def}
	}
	return cursor{s: c.s, tr: a.Map.ElementType, ok: true, def: def}
}

// item steps into a list's items, not knowing which.
func (c cursor) item() cursor {
	a, ok := c.atom()
	if !ok || a.List == nil {
		return cursor{}
	}
	return cursor{s: c.s, tr: a.List.ElementType, ok: true}
}

// itemAt steps into the list item at position i (Git's order, which defaulting keeps).
func (c cursor) itemAt(i int) cursor {
	ic := c.item()
	if l, ok := c.def.([]any); ok && i < len(l) {
		ic.def = l[i]
	}
	return ic
}

// atomic says the cursor is on a value the schema makes atomic (x-kubernetes-map-type or
// list-type atomic): one writer owns it whole, so a key or item live has and Git does not is a
// difference, not another writer's addition.
func (c cursor) atomic() bool {
	a, ok := c.atom()
	if !ok {
		return false
	}
	return a.Map != nil && a.Map.ElementRelationship == smdschema.Atomic || a.List != nil && a.List.ElementRelationship == smdschema.Atomic
}

// listKeys returns the key fields of an associative list at the cursor.
func (c cursor) listKeys() []string {
	a, ok := c.atom()
	if !ok || a.List == nil {
		return nil
	}
	return a.List.Keys
}

// associative says the cursor is on a list whose items are identified by keys or by value
// (x-kubernetes-list-type map or set), not by position.
func (c cursor) associative() bool {
	a, ok := c.atom()
	return ok && a.List != nil && a.List.ElementRelationship == smdschema.Associative
}

func (c cursor) atom() (smdschema.Atom, bool) {
	if !c.ok {
		return smdschema.Atom{}, false
	}
	return c.s.Resolve(c.tr)
}

// defaultOf returns the schema's default for a field of the map at c.
func (c cursor) defaultOf(name string) (any, bool) {
	if m, ok := c.def.(map[string]any); ok {
		if v, ok := m[name]; ok && v != nil {
			return v, true
		}
	}
	a, ok := c.atom()
	if !ok || a.Map == nil {
		return nil, false
	}
	f, ok := a.Map.FindField(name)
	if !ok || f.Default == nil {
		return nil, false
	}
	return f.Default, true
}

func (c cursor) quantity() bool { return c.ok && isQuantity(c.tr) }

// covered reports whether live holds everything desired declares, with equal values: maps may
// carry more keys in live (judged separately), lists must have the same items in the same
// order, and scalars are equal — by numeric value where the schema says the field is a Quantity,
// by value otherwise (8080 and "8080" differ, as they do to the API server's schema).
//
// Inside a value the schema makes atomic, live may hold no key Git does not set beyond the
// schema's defaults. A key field of a keyed list item Git leaves out must hold its default live
// (Git's port 53 with no protocol is 53/TCP, not 53/UDP).
func covered(desired, live any, c cursor) bool {
	if c.atomic() && undeclaredExtras(desired, live, c) {
		return false
	}
	switch d := desired.(type) {
	case nil:
		return true
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			if dv == nil {
				continue
			}
			lv, ok := l[k]
			if !ok {
				if isEmpty(dv) {
					continue
				}
				return false
			}
			if !covered(dv, lv, c.field(k)) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		if len(d) != len(l) {
			return false
		}
		keys := c.listKeys()
		for i := range d {
			ic := c.itemAt(i)
			if !covered(d[i], l[i], ic) || !defaultedKeys(d[i], l[i], keys, ic) {
				return false
			}
		}
		return true
	default:
		return scalarEqual(desired, live, c.quantity())
	}
}

// defaultedKeys reports whether every key field the desired item leaves out holds the schema's
// default in the live item (or the schema has none to check against).
func defaultedKeys(desired, live any, keys []string, c cursor) bool {
	d, ok1 := desired.(map[string]any)
	l, ok2 := live.(map[string]any)
	if !ok1 || !ok2 {
		return true
	}
	for _, k := range keys {
		if _, set := d[k]; set {
			continue
		}
		def, ok := c.defaultOf(k)
		if !ok {
			continue
		}
		if lv, present := l[k]; present && lv != nil && !scalarEqual(def, lv, false) {
			return false
		}
	}
	return true
}

// undeclaredExtras reports whether live, inside a value desired covers, holds map keys desired
// does not set whose values are not the schema's defaults: inside an atomic value these are a
// writer's additions, not the API server's defaulting.
func undeclaredExtras(desired, live any, c cursor) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, _ := live.(map[string]any)
		for k, lv := range l {
			dv, declared := d[k]
			if declared && dv != nil {
				if undeclaredExtras(dv, lv, c.field(k)) {
					return true
				}
				continue
			}
			if isEmpty(lv) {
				continue
			}
			if def, ok := c.defaultOf(k); ok && covered(def, lv, c.field(k)) {
				continue
			}
			return true
		}
	case []any:
		l, _ := live.([]any)
		for i := range d {
			if i < len(l) && undeclaredExtras(d[i], l[i], c.itemAt(i)) {
				return true
			}
		}
	}
	return false
}

// scalarEqual compares leaf values: equal JSON values, numbers by value (1 and 1.0), and
// Quantities by amount when the schema says the field is one ("1000m" = "1", 2 = "2").
func scalarEqual(a, b any, quantity bool) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	if fa, ok := Number(a); ok {
		if fb, ok := Number(b); ok {
			return fa == fb
		}
	}
	if !quantity || a == nil || b == nil {
		return false
	}
	qa, err := resource.ParseQuantity(fmt.Sprint(a))
	if err != nil {
		return false
	}
	qb, err := resource.ParseQuantity(fmt.Sprint(b))
	if err != nil {
		return false
	}
	return qa.Cmp(qb) == 0
}

// Number reads a JSON number as decoded by either encoding/json (float64, json.Number) or the
// API machinery (int64, int32, int), for comparing values across the two.
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	}
	return 0, false
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// pruneNulls drops null values from a desired object: YAML's "key:" or "key: null" declares
// nothing the API server stores.
func pruneNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = pruneNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = pruneNulls(e)
		}
		return out
	}
	return v
}
