package drift

import (
	"sort"
)

// rawDiff is a difference found by comparing values, before attribution.
type rawDiff struct {
	path          path
	desired, live any
	change        string
}

// Change kinds of a field.
const (
	Changed = "changed"
	Added   = "added"
	Removed = "removed"
)

// listKeys names the merge keys of the Kubernetes lists that are maps by key, by field name.
// Lists not named here whose items all carry "name" are keyed by name; other lists compare atomically.
var listKeys = map[string][]string{
	"containers": {"name"}, "initContainers": {"name"}, "ephemeralContainers": {"name"},
	"env": {"name"}, "volumes": {"name"}, "volumeMounts": {"mountPath"}, "volumeDevices": {"devicePath"},
	"imagePullSecrets": {"name"}, "hostAliases": {"ip"}, "resourceClaims": {"name"},
	"ports": {"containerPort", "port"}, // container ports by containerPort, Service ports by port
}

// compareObject walks every field desired declares and compares it with live.
func compareObject(desired, live map[string]any) []rawDiff {
	var out []rawDiff
	keys := sortedKeys(desired)
	for _, k := range keys {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			dm, _ := desired[k].(map[string]any)
			lm, _ := live[k].(map[string]any)
			for _, f := range []string{"labels", "annotations"} {
				if dv, ok := dm[f]; ok {
					out = compareValue(out, path{}.child("metadata").child(f), dv, lm[f], lm[f] != nil)
				}
			}
		default:
			lv, ok := live[k]
			out = compareValue(out, path{}.child(k), desired[k], lv, ok)
		}
	}
	return out
}

func compareValue(out []rawDiff, p path, d, l any, present bool) []rawDiff {
	if d == nil {
		return out
	}
	if !present || l == nil {
		if isEmpty(d) {
			return out
		}
		return append(out, rawDiff{path: p, desired: d, change: Removed})
	}
	switch dv := d.(type) {
	case map[string]any:
		lv, ok := l.(map[string]any)
		if !ok {
			return append(out, rawDiff{path: p, desired: d, live: l, change: Changed})
		}
		for _, k := range sortedKeys(dv) {
			lval, ok := lv[k]
			out = compareValue(out, p.child(k), dv[k], lval, ok)
		}
		return out
	case []any:
		lv, ok := l.([]any)
		if !ok {
			return append(out, rawDiff{path: p, desired: d, live: l, change: Changed})
		}
		return compareList(out, p, dv, lv)
	default:
		if !scalarEqual(d, l) {
			return append(out, rawDiff{path: p, desired: d, live: l, change: Changed})
		}
		return out
	}
}

// compareList matches keyed lists item by key and recurses; atomic lists match item by item:
// a desired item no live item holds is removed, a live item no desired item explains is added.
func compareList(out []rawDiff, p path, d, l []any) []rawDiff {
	if key := listKey(p, d); key != nil {
		for _, it := range d {
			m := it.(map[string]any)
			kv := keyOf(m, key)
			item, ok := findKeyed(l, kv)
			out = compareValue(out, p.keyed(kv), it, item, ok)
		}
		return out
	}
	if allScalars(d) {
		if !valueEqual(d, l) {
			out = append(out, rawDiff{path: p, desired: d, live: l, change: Changed})
		}
		return out
	}
	if len(d) == len(l) {
		// Same length: item i is item i (an edited rule, a changed weight) — compare positionally
		// so the report names the field, not the whole item.
		for i := range d {
			out = compareValue(out, p.indexed(i), d[i], l[i], true)
		}
		return out
	}
	used := make([]bool, len(l))
	for i, it := range d {
		found := false
		for j, lit := range l {
			if !used[j] && valueEqual(it, lit) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			out = append(out, rawDiff{path: p.indexed(i), desired: it, change: Removed})
		}
	}
	for j, lit := range l {
		if !used[j] && len(l) > len(d) {
			out = append(out, rawDiff{path: p.indexed(j), live: lit, change: Added})
		}
	}
	return out
}

// listKey returns the merge key fields of a list of maps, nil for an atomic list.
func listKey(p path, items []any) []string {
	if len(items) == 0 {
		return nil
	}
	name := ""
	if len(p) > 0 && p[len(p)-1].kind == fieldElem {
		name = p[len(p)-1].field
	}
	candidates, known := listKeys[name]
	if !known {
		candidates = []string{"name"}
	}
	for _, k := range candidates {
		all := true
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok || m[k] == nil {
				all = false
				break
			}
		}
		if all {
			return []string{k}
		}
	}
	return nil
}

func keyOf(m map[string]any, key []string) map[string]any {
	kv := make(map[string]any, len(key))
	for _, k := range key {
		kv[k] = m[k]
	}
	return kv
}

func allScalars(l []any) bool {
	for _, v := range l {
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FieldChange is a difference between two versions of an object's declared fields.
type FieldChange struct {
	Path   string `json:"path"`
	From   any    `json:"from"`
	To     any    `json:"to"`
	Change string `json:"change"`
}

// CompareRendered compares two renderings of one object (e.g. at two Git revisions): fields
// changed, added in to, or removed from from. Values are normalised as for live comparisons.
func CompareRendered(from, to map[string]any) []FieldChange {
	var out []FieldChange
	for _, d := range compareObject(to, from) {
		c := FieldChange{Path: d.path.String(), From: d.live, To: d.desired, Change: Changed}
		if d.change == Removed { // declared in to, absent from from
			c.Change, c.From = Added, nil
		}
		out = append(out, c)
	}
	for _, d := range compareObject(from, to) {
		if d.change == Removed {
			out = append(out, FieldChange{Path: d.path.String(), From: d.desired, Change: Removed})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
