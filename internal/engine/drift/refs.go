package drift

import (
	"cmp"
	"encoding/json"
	"slices"

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
// a few objects needs to know of the whole render. An IndexBuilder makes one to keep between audits.
type Index struct {
	byRef      map[Ref]*unstructured.Unstructured
	raw        map[Ref]json.RawMessage // an IndexBuilder's: the objects as JSON
	namespaces map[string]bool
	kinds      map[schema.GroupKind]schema.GroupVersionKind // the kinds the render declares
	// shadowed are earlier objects of a Ref the render declares more than once (two apiVersions
	// of one kind, or one namespaced object with and without the destination namespace): the
	// last one is the Ref's, as in Argo CD, but a full audit compares each with the cluster.
	shadowed []*unstructured.Unstructured
}

// NewIndex indexes desired.
func NewIndex(desired []*unstructured.Unstructured) *Index {
	idx := &Index{byRef: make(map[Ref]*unstructured.Unstructured, len(desired)), namespaces: map[string]bool{}, kinds: map[schema.GroupKind]schema.GroupVersionKind{}}
	for _, d := range desired {
		r := RefOf(d)
		if prev, ok := idx.byRef[r]; ok {
			idx.shadowed = append(idx.shadowed, prev)
		}
		idx.byRef[r] = d
		idx.manages(d)
	}
	return idx
}

// IndexBuilder makes a compact index one object at a time: it holds each object as JSON, to keep
// between audits (a decoded 10,000-object render takes about five times as much, ~40 MB), and
// Desired decodes the ones asked for. A render read as JSON is never decoded whole.
type IndexBuilder struct{ idx *Index }

// NewIndexBuilder returns a builder of an index of about n objects.
func NewIndexBuilder(n int) *IndexBuilder {
	return &IndexBuilder{idx: &Index{byRef: map[Ref]*unstructured.Unstructured{}, raw: make(map[Ref]json.RawMessage, n), namespaces: map[string]bool{},
		kinds: map[schema.GroupKind]schema.GroupVersionKind{}}}
}

// Add indexes d. raw, when not nil, is d as JSON, kept as it is (read only) instead of encoding d
// again. An object that cannot be encoded stays decoded.
func (b *IndexBuilder) Add(d *unstructured.Unstructured, raw json.RawMessage) {
	idx := b.idx
	idx.manages(d)
	r := RefOf(d)
	if prev, ok := idx.Desired(r); ok {
		idx.shadowed = append(idx.shadowed, prev)
	}
	delete(idx.byRef, r)
	delete(idx.raw, r)
	if raw == nil {
		var err error
		if raw, err = d.MarshalJSON(); err != nil {
			idx.byRef[r] = d
			return
		}
	}
	idx.raw[r] = raw
}

// Index returns the index built.
func (b *IndexBuilder) Index() *Index { return b.idx }

// manages records the namespaces d makes managed (its own, or the one it declares) and its kind.
func (idx *Index) manages(d *unstructured.Unstructured) {
	gvk := d.GroupVersionKind()
	if _, ok := idx.kinds[gvk.GroupKind()]; !ok && gvk.Kind != "" {
		idx.kinds[gvk.GroupKind()] = gvk
	}
	if d.GetNamespace() != "" {
		idx.namespaces[d.GetNamespace()] = true
	}
	if d.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
		idx.namespaces[d.GetName()] = true
	}
}

// Len is how many objects the index declares.
func (idx *Index) Len() int { return len(idx.byRef) + len(idx.raw) }

// Refs returns the Refs of every object the index holds, sorted by group, kind, namespace and
// name.
func (idx *Index) Refs() []Ref {
	out := make([]Ref, 0, len(idx.byRef)+len(idx.raw))
	for r := range idx.byRef {
		out = append(out, r)
	}
	for r := range idx.raw {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Ref) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Has says whether Git declares the object r names.
func (idx *Index) Has(r Ref) bool {
	if _, ok := idx.byRef[r]; ok {
		return true
	}
	_, ok := idx.raw[r]
	return ok
}

// Desired returns Git's object r names (a fresh copy from a compact index).
func (idx *Index) Desired(r Ref) (*unstructured.Unstructured, bool) {
	if d, ok := idx.byRef[r]; ok {
		return d, true
	}
	raw, ok := idx.raw[r]
	if !ok {
		return nil, false
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, false // cannot happen: the builder encoded it from an Unstructured, or was given what decoded to it
	}
	return u, true
}

// AuditRefs audits only the objects refs name, as Audit would: a declared one is compared with
// its live counterpart (Missing when gone), an undeclared one of an ExtraKinds kind in a managed
// namespace is checked for being Extra. What Audit would report for these objects is what this
// returns, sorted; objects of other refs are left out, so a caller replaces exactly refs' entries
// of an earlier full report.
func AuditRefs(idx *Index, refs []Ref, live LiveReader, opts Options) []Object {
	history := prepare(live, &opts)
	extraKinds := idx.extraKinds(&opts) // once, not per ref
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
		for _, gvk := range extraKinds {
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
