package drift

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Ref names one object: group, kind, namespace ("" when cluster-scoped) and name. The version
// is left out: every version of a kind serves the same objects.
type Ref struct {
	Group, Kind, Namespace, Name string
}

// RefOf returns the Ref of u.
func RefOf(u *unstructured.Unstructured) Ref {
	return Ref{Group: u.GroupVersionKind().Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// RefOfObject returns the Ref of a reported object.
func RefOfObject(o *Object) Ref {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return Ref{Group: gv.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
}

// Index is a render's desired objects by Ref, and the namespaces they manage: what an audit of
// a few objects needs to know of the whole render. It holds each object as JSON (kept between
// audits, a decoded 10,000-object render would take about five times as much) and decodes the
// ones asked for.
type Index struct {
	byRef      map[Ref]json.RawMessage
	namespaces map[string]bool
}

// NewIndex indexes desired.
func NewIndex(desired []*unstructured.Unstructured) *Index {
	idx := &Index{byRef: make(map[Ref]json.RawMessage, len(desired)), namespaces: map[string]bool{}}
	for _, d := range desired {
		raw, err := d.MarshalJSON()
		if err != nil {
			raw = nil // not encodable (not from a render): declared, but never decoded
		}
		idx.byRef[RefOf(d)] = raw
		if d.GetNamespace() != "" {
			idx.namespaces[d.GetNamespace()] = true
		}
		if d.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
			idx.namespaces[d.GetName()] = true
		}
	}
	return idx
}

// Has says whether Git declares the object r names.
func (idx *Index) Has(r Ref) bool { _, ok := idx.byRef[r]; return ok }

// Desired returns a fresh copy of Git's object r names.
func (idx *Index) Desired(r Ref) (*unstructured.Unstructured, bool) {
	raw, ok := idx.byRef[r]
	if !ok || raw == nil {
		return nil, false
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, false
	}
	return u, true
}

// AuditRefs audits only the objects refs name, as Audit would: a declared one is compared with
// its live counterpart (Missing when gone), an undeclared one of an ExtraKinds kind in a managed
// namespace is checked for being Extra. What Audit would report for these objects is what this
// returns, sorted; objects of other refs are left out, so a caller replaces exactly refs' entries
// of an earlier full report.
func AuditRefs(idx *Index, refs []Ref, live LiveReader, opts Options) []Object {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	history, _ := live.(VersionHistory)
	if opts.Autoscaled == nil {
		opts.Autoscaled = AutoscaledIn(live)
	}
	var out []Object
	seen := map[Ref]bool{}
	for _, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		if d, ok := idx.Desired(r); ok {
			if o := auditOne(d, live, history, &opts); o != nil {
				out = append(out, *o)
			}
			continue
		}
		for _, gvk := range opts.ExtraKinds {
			if gvk.Group != r.Group || gvk.Kind != r.Kind {
				continue
			}
			if l, ok := live.Get(gvk, r.Namespace, r.Name); ok {
				if o := idx.extra(gvk, l, opts); o != nil {
					out = append(out, *o)
				}
			}
			break
		}
	}
	SortObjects(out)
	return out
}
