package drift

import (
	"fmt"
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
func compareDeclared(desired, live map[string]any, pt *typed.ParseableType) comparison {
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
	dt, lt, err := typedPair(desired, live, pt)
	if err != nil && pt != &typed.DeducedParseableType {
		res.deduced = err.Error()
		pt = &typed.DeducedParseableType
		root = cursor{}
		dt, lt, err = typedPair(desired, live, pt)
	}
	if err != nil {
		// Not even deduced types: compare the whole object as one value.
		res.deduced = err.Error()
		res.diffs = []rawDiff{{path: fieldpath.Path{}, desired: desired, live: live, change: Changed, atomic: true}}
		return res
	}
	declared, err := dt.ToFieldSet()
	if err != nil {
		res.diffs = []rawDiff{{path: fieldpath.Path{}, desired: desired, live: live, change: Changed, atomic: true}}
		res.deduced = err.Error()
		return res
	}
	cmp, err := dt.Compare(lt.ExtractItems(declared.Leaves(), typed.WithAppendKeyFields()))
	if err != nil {
		res.deduced = err.Error()
		res.diffs = []rawDiff{{path: fieldpath.Path{}, desired: desired, live: live, change: Changed, atomic: true}}
		return res
	}
	cmp.Modified.Iterate(func(p fieldpath.Path) {
		d, _ := valueAt(desired, p)
		l, _ := valueAt(live, p)
		c := root.at(p)
		if !covered(d, l, c) {
			res.diffs = append(res.diffs, rawDiff{path: p.Copy(), desired: d, live: l, change: Changed, atomic: isContainer(d)})
			return
		}
		if isContainer(d) && undeclaredExtras(d, l, c) {
			// An atomic value holds what Git says plus keys that are not defaults: replaced by a
			// writer; whether that writer is the applier decides (see attribution).
			res.diffs = append(res.diffs, rawDiff{path: p.Copy(), desired: d, live: l, change: Changed, atomic: true})
		}
	})
	for _, p := range minimal(cmp.Removed) {
		d, _ := valueAt(desired, p)
		if isEmpty(d) {
			continue // "resources: {}" and "env: []" are stored as nothing
		}
		res.diffs = append(res.diffs, rawDiff{path: p, desired: d, change: Removed})
	}
	sort.SliceStable(res.diffs, func(i, j int) bool { return res.diffs[i].path.Compare(res.diffs[j].path) < 0 })
	return res
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
	for _, pe := range p {
		if pe.FieldName != nil {
			c = c.field(*pe.FieldName)
		} else {
			c = c.item()
		}
	}
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
	for _, d := range compareDeclared(to, from, pt).diffs {
		c := FieldChange{Path: Display(d.path), From: d.live, To: d.desired, Change: Changed}
		if d.change == Removed { // declared in to, absent from from
			c.Change, c.From = Added, nil
		}
		out = append(out, c)
	}
	for _, d := range compareDeclared(from, to, pt).diffs {
		if d.change == Removed {
			out = append(out, FieldChange{Path: Display(d.path), From: d.desired, Change: Removed})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
