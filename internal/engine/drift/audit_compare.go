package drift

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CompareObject compares one desired object with its live counterpart and returns it as a
// Modified object, or nil when nothing drifted. versions are earlier live versions the watch saw
// (newest first, may be nil), used to name who removed a field.
func CompareObject(desiredObj, liveObj *unstructured.Unstructured, versions []*unstructured.Unstructured, opts *Options) *Object {
	gvk := desiredObj.GroupVersionKind()
	pt := opts.Schema.Type(gvk)
	d, l := desiredObj, liveObj
	if opts.Normalizer != nil {
		if nd, nl, err := opts.Normalizer.Normalize(d, l, pt); err == nil && nd != nil && nl != nil {
			d, l = nd, nl
		}
	}
	dm, _ := pruneNulls(d.Object).(map[string]any) // a copy: maps and lists are rebuilt
	delete(dm, "status")
	secret := isSecret(gvk.Group, gvk.Kind)
	if secret {
		secretData(dm)
	}
	os := owners(liveObj.GetManagedFields())
	gk := gvk.GroupKind()
	var defaulted func() map[string]any
	if opts.Defaults != nil {
		var dd map[string]any
		defaulted = func() map[string]any {
			if dd == nil {
				dd, _ = pruneNulls(opts.Defaults(d).Object).(map[string]any)
				if secret {
					secretData(dd)
				}
			}
			return dd
		}
	}
	res := compareDeclared(dm, l.Object, pt, defaulted)
	opts.Excused.reset(opts.Cluster, RefOf(desiredObj))
	var fields []Field
	seen := map[string]bool{}
	for _, rd := range res.diffs {
		seen[rd.path.String()] = true
		at := ownersAt(os, rd.ownedPath())
		lv, _ := valueAt(l.Object, rd.ownedPath())
		ok, borrowed, manager := opts.excuse(liveObj, gk, at, rd.ownedPath(), lv, rd.change)
		if ok {
			continue
		}
		rd.borrowed, rd.borrowedName = borrowed, manager
		if rd.change == Added && len(rd.owned) > 0 && !opts.builtin(gvk) && appliedBy(at, opts.Applier) {
			// A key inside an atomic value of a custom resource that the applier's last apply
			// wrote whole: what a mutating webhook or the CRD's server-side logic added on that
			// write (no scheme defaulting exists to tell it apart). Built-in kinds are judged by
			// their defaults instead.
			continue
		}
		if rd.change == Removed && isZero(rd.desired) && ownedBy(at, opts.Applier) {
			// false, 0 or "" in Git, absent live, and the applier still owns the path: the API
			// server dropped an omitempty zero value the applier sent. A later writer that removed
			// the field would have taken the path out of the applier's set.
			continue
		}
		f := newField(rd)
		if w := latest(at); w != nil {
			f.Writer = w.writer()
		} else if rd.change == Removed {
			if w := removedBy(versions, rd.ownedPath()); w != nil {
				f.Writer = *w
			}
		}
		fields = append(fields, f)
	}
	for _, rd := range addedFields(liveObj, gk, dm, l.Object, writers(os), opts, seen, defaulted) {
		f := newField(rd)
		if w := latest(ownersAt(os, rd.path)); w != nil {
			f.Writer = w.writer()
		} else if w := latest(ownersUnder(os, rd.path)); w != nil {
			f.Writer = w.writer()
		}
		fields = append(fields, f)
	}
	if rd, ok := unownedReplicas(gk, dm, l.Object, os, defaulted, opts, seen); ok {
		fields = append(fields, newField(rd))
	}
	if !opts.IgnoreOwnership {
		if rd, w, lost := ownershipLost(liveObj, versions, dm, os, opts.Applier); lost {
			f := newField(rd)
			if w != nil {
				f.Writer = *w
			}
			fields = append(fields, f)
			base := dm
			if defaulted != nil {
				base = defaulted()
			}
			for _, rd := range unownedAdditions(gvk, base, l.Object, writers(os), pt, opts, seen) {
				fields = append(fields, newField(rd))
			}
		}
	}
	if len(fields) == 0 {
		return nil
	}
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].Path < fields[j].Path })
	if secret {
		for i := range fields {
			fields[i].Desired, fields[i].Live = withoutLastApplied(fields[i].Desired), withoutLastApplied(fields[i].Live)
			if p := fields[i].FieldPath.Path(); len(p) > 0 && p[len(p)-1].FieldName != nil && *p[len(p)-1].FieldName == lastApplied {
				fields[i].Desired, fields[i].Live = "(redacted)", "(redacted)"
			}
			if secretField(fields[i].FieldPath.Path()) {
				fields[i].Desired, fields[i].Live = maskSecret(fields[i].Desired, opts.SecretKey), maskSecret(fields[i].Live, opts.SecretKey)
			}
		}
	}
	o := &Object{APIVersion: desiredObj.GetAPIVersion(), Kind: desiredObj.GetKind(), Namespace: desiredObj.GetNamespace(), Name: desiredObj.GetName(), Status: Modified, Fields: fields}
	if res.deduced != "" {
		o.Schema = "deduced: " + res.deduced
	}
	return o
}

func isZero(v any) bool {
	switch x := v.(type) {
	case bool:
		return !x
	case string:
		return x == ""
	case int64:
		return x == 0
	case float64:
		return x == 0
	}
	return false
}

// appliedBy reports whether manager's server-side apply entry is among the owners.
func appliedBy(os []*owner, manager string) bool {
	for _, o := range os {
		if o.Manager == manager && o.Operation == "Apply" {
			return true
		}
	}
	return false
}

// builtin reports whether the kind's defaults are known (Options.Builtin).
func (opts *Options) builtin(gvk schema.GroupVersionKind) bool {
	return opts.Builtin != nil && opts.Builtin(gvk)
}

func ownedBy(os []*owner, manager string) bool {
	for _, o := range os {
		if o.Manager == manager {
			return true
		}
	}
	return false
}
