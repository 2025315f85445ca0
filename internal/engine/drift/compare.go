package drift

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// Change kinds of a field.
const (
	Changed = "changed"
	Added   = "added"
	Removed = "removed"
)

// rawDiff is a difference found by comparing values, before attribution.
type rawDiff struct {
	path          fieldpath.Path
	desired, live any
	change        string
	// atomic is set when the path names an atomic list or map that live holds with additions.
	atomic bool
	// owned is the path managedFields knows (the atomic value a refined path lies in); nil: path.
	owned fieldpath.Path
	// borrowed is the person who wrote the value under a controller's name, borrowedName that
	// name (from the audit events).
	borrowed     *Actor
	borrowedName string
}

// ownedPath is the path whose owners explain the difference.
func (d rawDiff) ownedPath() fieldpath.Path {
	if d.owned != nil {
		return d.owned
	}
	return d.path
}

// comparison is the outcome of comparing the fields Git declares with live.
type comparison struct {
	diffs []rawDiff
	// deduced says why the comparison fell back to deduced types (maps by key, lists atomic).
	deduced string
}

// compareDeclared compares every field desired declares with live, by value, on typed values
// built from pt (nil: deduced types). A field is changed when live holds another value, removed
// when live lacks it. Fields live has and desired does not declare are not looked at here.
//
// defaulted, when not nil, returns Git's object as the API server's defaulting would store it; it
// is asked for only when the object is not covered at first sight.
func compareDeclared(desired, live map[string]any, pt *typed.ParseableType, defaulted func() map[string]any) comparison {
	var res comparison
	if pt == nil {
		pt = &typed.DeducedParseableType
		res.deduced = "the cluster publishes no schema for this kind"
	}
	root := rootCursor(pt)
	if covered(desired, live, root) {
		// The common case, without building typed values: every declared field is there and equal.
		return res
	}
	if defaulted != nil {
		if root.def = defaulted(); covered(desired, live, root) {
			return res // keys inside atomic values were the server's defaults
		}
	}
	// The slow path: an explicit null is no value (the API server stores none; Git's are pruned).
	live, _ = pruneNulls(live).(map[string]any)
	dt, lt, err := typedPair(desired, live, pt)
	if err != nil && pt != &typed.DeducedParseableType {
		res.deduced = err.Error()
		pt = &typed.DeducedParseableType
		root = cursor{def: root.def}
		dt, lt, err = typedPair(desired, live, pt)
	}
	var cmp *typed.Comparison
	if err == nil {
		cmp, err = compareTyped(dt, lt)
	}
	if err != nil {
		// Not even deduced types: the whole object is one value, and it differs.
		res.deduced = err.Error()
		res.diffs = []rawDiff{{path: fieldpath.Path{}, desired: desired, live: live, change: Changed}}
		return res
	}
	cmp.Modified.Iterate(func(p fieldpath.Path) {
		d, _ := valueAt(desired, p)
		l, _ := valueAt(live, p)
		c := root.at(p)
		if !covered(d, l, c) {
			if isContainer(d) {
				res.diffs = append(res.diffs, refine(p.Copy(), d, l, c)...)
				return
			}
			res.diffs = append(res.diffs, rawDiff{path: p.Copy(), desired: d, live: l, change: Changed})
			return
		}
		if isContainer(d) && undeclaredExtras(d, l, c) {
			// An atomic value holds what Git says plus keys that are not defaults: replaced by a
			// writer; whether that writer is the applier decides (see attribution).
			for _, rd := range refine(p.Copy(), d, l, c) {
				rd.atomic = true
				res.diffs = append(res.diffs, rd)
			}
		}
	})
	for _, p := range minimal(cmp.Removed) {
		d, _ := valueAt(desired, p)
		if isEmpty(d) {
			continue // "resources: {}" and "env: []" are stored as nothing
		}
		if root.at(p).associative() {
			// A keyed list removed whole (the last env var unset): name each declared item, as
			// kubectl diff's reader would, not the list.
			for _, ip := range itemsUnder(cmp.Removed, p) {
				id, _ := valueAt(desired, ip)
				res.diffs = append(res.diffs, rawDiff{path: ip, desired: id, change: Removed})
			}
			continue
		}
		res.diffs = append(res.diffs, rawDiff{path: p, desired: d, change: Removed})
	}
	sort.SliceStable(res.diffs, func(i, j int) bool { return res.diffs[i].path.Compare(res.diffs[j].path) < 0 })
	return res
}

// refine names the leaves that differ inside an atomic value when its shape allows (maps by key,
// lists of equal length by position), so a report says .spec.rules[0].backendRefs[1].weight
// rather than the whole list; the atomic path stays what ownership is looked up on.
func refine(root fieldpath.Path, d, l any, c cursor) []rawDiff {
	var out []rawDiff
	// Inside an atomic value a key live has and Git lacks is a difference too.
	covered := func(d, l any, c cursor) bool { return covered(d, l, c) && !undeclaredExtras(d, l, c) }
	var walk func(p fieldpath.Path, d, l any, c cursor) bool
	walk = func(p fieldpath.Path, d, l any, c cursor) bool {
		switch dv := d.(type) {
		case map[string]any:
			lv, ok := l.(map[string]any)
			if !ok {
				return false
			}
			for _, k := range sortedKeys(dv) {
				if covered(dv[k], lv[k], c.field(k)) {
					continue
				}
				kp := append(p[:len(p):len(p)], fieldpath.PathElement{FieldName: &k})
				if x, present := lv[k]; !present {
					out = append(out, rawDiff{path: kp, desired: dv[k], change: Removed, owned: root})
				} else if !walk(kp, dv[k], x, c.field(k)) {
					out = append(out, rawDiff{path: kp, desired: dv[k], live: x, change: Changed, owned: root})
				}
			}
			for _, k := range sortedKeys(lv) {
				if _, declared := dv[k]; declared || k == "status" && len(p) == 0 || isEmpty(lv[k]) {
					continue
				}
				if def, ok := c.defaultOf(k); ok && covered(def, lv[k], c.field(k)) {
					continue
				}
				kp := append(p[:len(p):len(p)], fieldpath.PathElement{FieldName: &k})
				out = append(out, rawDiff{path: kp, live: lv[k], change: Added, owned: root})
			}
			return true
		case []any:
			lv, ok := l.([]any)
			if !ok || len(lv) != len(dv) {
				return false
			}
			for i := range dv {
				ic := c.itemAt(i)
				if covered(dv[i], lv[i], ic) {
					continue
				}
				ip := append(p[:len(p):len(p)], fieldpath.PathElement{Index: &i})
				if !walk(ip, dv[i], lv[i], ic) {
					out = append(out, rawDiff{path: ip, desired: dv[i], live: lv[i], change: Changed, owned: root})
				}
			}
			return true
		}
		return false
	}
	if !walk(root, d, l, c) || len(out) == 0 {
		return []rawDiff{{path: root, desired: d, live: l, change: Changed}}
	}
	return out
}

// itemsUnder lists the paths of s one element below p (the items of a list at p).
func itemsUnder(s *fieldpath.Set, p fieldpath.Path) []fieldpath.Path {
	var out []fieldpath.Path
	s.Iterate(func(q fieldpath.Path) {
		if len(q) == len(p)+1 && q[:len(p)].Equals(p) {
			out = append(out, q.Copy())
		}
	})
	return out
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// compareTyped compares desired with the part of live that desired declares.
func compareTyped(dt, lt *typed.TypedValue) (*typed.Comparison, error) {
	declared, err := dt.ToFieldSet()
	if err != nil {
		return nil, err
	}
	return dt.Compare(lt.ExtractItems(declared.Leaves(), typed.WithAppendKeyFields()))
}

func typedPair(desired, live map[string]any, pt *typed.ParseableType) (*typed.TypedValue, *typed.TypedValue, error) {
	dt, err := pt.FromUnstructured(desired, typed.AllowDuplicates)
	if err != nil {
		return nil, nil, fmt.Errorf("the Git object does not match the cluster's schema: %w", err)
	}
	lt, err := pt.FromUnstructured(live, typed.AllowDuplicates)
	if err != nil {
		return nil, nil, fmt.Errorf("the live object does not match the cluster's schema: %w", err)
	}
	return dt, lt, nil
}

func rootCursor(pt *typed.ParseableType) cursor {
	if pt == nil || pt.Schema == nil || pt == &typed.DeducedParseableType {
		return cursor{}
	}
	return cursor{s: pt.Schema, tr: pt.TypeRef, ok: true}
}

// at moves the cursor along a field path.
func (c cursor) at(p fieldpath.Path) cursor {
	def, _ := valueAt(c.def, p)
	for _, pe := range p {
		if pe.FieldName != nil {
			c = c.field(*pe.FieldName)
		} else {
			c = c.item()
		}
	}
	c.def = def
	return c
}

func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// FieldChange is a difference between two versions of an object's declared fields.
type FieldChange struct {
	Path   string `json:"path"`
	From   any    `json:"from"`
	To     any    `json:"to"`
	Change string `json:"change"`
	// FieldPath is Path structured, for programs that match paths (blame); not in the JSON form.
	FieldPath FieldPath `json:"-"`
}

// CompareRendered compares two renderings of one object (e.g. at two Git revisions): fields
// changed, added in to, or removed from from. With no schema at hand (an offline check), maps
// compare by key and lists as whole values.
func CompareRendered(from, to map[string]any, pt *typed.ParseableType) []FieldChange {
	from, _ = pruneNulls(from).(map[string]any)
	to, _ = pruneNulls(to).(map[string]any)
	delete(from, "status")
	delete(to, "status")
	var out []FieldChange
	back := compareDeclared(from, to, pt, nil).diffs
	removed := map[string]bool{} // a field removed is said once, as removed, though both passes see it
	for _, d := range back {
		if d.change == Removed {
			removed[Display(d.path)] = true
		}
	}
	for _, d := range compareDeclared(to, from, pt, nil).diffs {
		c := FieldChange{Path: Display(d.path), From: d.live, To: d.desired, Change: Changed, FieldPath: FieldPath(d.path)}
		if d.change == Removed { // declared in to, absent from from
			c.Change, c.From = Added, nil
		}
		if removed[c.Path] && d.desired == nil {
			continue
		}
		out = append(out, c)
	}
	for _, d := range back {
		if d.change == Removed {
			out = append(out, FieldChange{Path: Display(d.path), From: d.desired, Change: Removed, FieldPath: FieldPath(d.path)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
