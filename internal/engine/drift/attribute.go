package drift

import (
	"bytes"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// owner is one managedFields entry; its field set is decoded on first use (in-sync objects
// never need the applier's, the largest).
type owner struct {
	Manager, Operation, Subresource string
	Time                            time.Time
	raw                             []byte
	set                             *fieldpath.Set
}

func owners(entries []metav1.ManagedFieldsEntry) []*owner {
	out := make([]*owner, 0, len(entries))
	for _, e := range entries {
		o := &owner{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource}
		if e.Time != nil {
			o.Time = e.Time.UTC()
		}
		if e.FieldsV1 != nil {
			o.raw = e.FieldsV1.Raw
		}
		out = append(out, o)
	}
	return out
}

// fields returns the entry's field set (empty when it does not decode).
func (o *owner) fields() *fieldpath.Set {
	if o.set == nil {
		o.set = &fieldpath.Set{}
		if len(o.raw) > 0 && o.set.FromJSON(bytes.NewReader(o.raw)) != nil {
			o.set = &fieldpath.Set{}
		}
	}
	return o.set
}

// ownersAt returns the entries whose field set holds exactly p, never an ancestor's owner.
func ownersAt(os []*owner, p fieldpath.Path) []*owner {
	var out []*owner
	for _, o := range os {
		if o.fields().Has(p) {
			out = append(out, o)
		}
	}
	return out
}

// latest returns the most recent of the entries (nil for none).
func latest(os []*owner) *owner {
	var best *owner
	for _, o := range os {
		if best == nil || o.Time.After(best.Time) {
			best = o
		}
	}
	return best
}

func (o *owner) writer() Writer {
	w := Writer{Manager: o.Manager, Operation: o.Operation, Subresource: o.Subresource}
	if !o.Time.IsZero() {
		w.Time = o.Time.Format(time.RFC3339)
	}
	return w
}

// addedFields returns the live fields Git does not declare that a writer other than the applier
// (and other than a controller named for them) set: labels, annotations and spec-like fields,
// never status or bookkeeping. Each leaf a writer owns is judged on its own (a controller rule
// names the field the controller writes, not the map it lies in); what remains is reported at
// the first path Git does not declare, its value holding only the leaves that remain.
func addedFields(liveObj *unstructured.Unstructured, gk schema.GroupKind, desired, live map[string]any, os []*owner, opts *Options, seen map[string]bool, defaulted func() map[string]any) []rawDiff {
	type group struct {
		path     fieldpath.Path
		excused  bool             // some leaf under path is not drift
		keep     []fieldpath.Path // the leaves that are, relative to path
		borrowed *Actor           // a person who wrote one under a controller's name
		manager  string           // that name
	}
	var out []rawDiff
	for _, o := range os {
		// The applier too: after a sync it owns only what Git declares (server-side apply drops
		// what it no longer sends), so a field it owns that Git lacks was written under its name.
		applier := o.Manager == opts.Applier
		groups := map[string]*group{}
		var order []string
		o.fields().Leaves().Iterate(func(leaf fieldpath.Path) {
			p, ok := firstUndeclared(desired, leaf, o, os)
			if !ok {
				return
			}
			k := p.String()
			g := groups[k]
			if g == nil {
				g = &group{path: p.Copy()}
				groups[k] = g
				order = append(order, k)
			}
			if !countsForAdded(leaf) {
				// Not reported (a client-side apply's last-applied-configuration, which holds a
				// Secret's data in clear): the value at p must leave it out.
				g.excused = true
				return
			}
			if trackingField(leaf) && (applier || opts.tracksItself(liveObj, leaf)) {
				g.excused = true
				return
			}
			lv, _ := valueAt(live, leaf)
			ok, borrowed, manager := opts.excuse(liveObj, gk, []*owner{o}, leaf, lv, Added)
			if ok {
				g.excused = true
				return
			}
			if borrowed != nil {
				g.borrowed, g.manager = borrowed, manager
			}
			g.keep = append(g.keep, leaf[len(p):].Copy())
		})
		for _, k := range order {
			g := groups[k]
			if len(g.keep) == 0 || seen[k] {
				continue
			}
			v, ok := valueAt(live, g.path)
			if !ok || v == nil { // an explicit null is no value
				continue
			}
			if g.excused {
				v = narrow(v, g.keep)
			}
			if defaulted != nil {
				if dv, ok := valueAt(defaulted(), g.path); ok && covered(dv, v, cursor{}) && covered(v, dv, cursor{}) {
					continue // what the server's defaulting stores there
				}
			}
			seen[k] = true
			out = append(out, rawDiff{path: g.path, live: v, change: Added, borrowed: g.borrowed, borrowedName: g.manager})
		}
	}
	return out
}

// narrow returns the part of v the relative paths reach: the map keys and list items they name,
// down to their leaves. An empty path keeps v whole.
func narrow(v any, rels []fieldpath.Path) any {
	for _, r := range rels {
		if len(r) == 0 {
			return v
		}
	}
	switch x := v.(type) {
	case map[string]any:
		sub := map[string][]fieldpath.Path{}
		for _, r := range rels {
			if r[0].FieldName == nil {
				return v // a path of another shape than the value: keep it whole
			}
			sub[*r[0].FieldName] = append(sub[*r[0].FieldName], r[1:])
		}
		out := make(map[string]any, len(sub))
		for k, rs := range sub {
			if c, ok := x[k]; ok {
				out[k] = narrow(c, rs)
			}
		}
		return out
	case []any:
		var out []any
		for i, it := range x {
			var rs []fieldpath.Path
			for _, r := range rels {
				if _, ok := valueAt([]any{it}, fieldpath.Path{itemElement(r[0], i)}); ok {
					rs = append(rs, r[1:])
				}
			}
			if rs != nil {
				out = append(out, narrow(it, rs))
			}
		}
		return out
	}
	return v
}

// itemElement is pe as it would find the item at index i of its list alone: an index element
// is matched against i.
func itemElement(pe fieldpath.PathElement, i int) fieldpath.PathElement {
	if pe.Index == nil {
		return pe
	}
	if *pe.Index == i {
		zero := 0
		return fieldpath.PathElement{Index: &zero}
	}
	none := -1
	return fieldpath.PathElement{Index: &none}
}

// excuse says whether a controller rule the options name excuses p of the live object, owned
// by os, with value lv: the rule's manager owns it and, with audit events, the write that left
// it was made by that controller's identity. When a person made it under the controller's name,
// borrowed is that person and manager the name. What it excuses goes into opts.Excused.
func (opts *Options) excuse(live *unstructured.Unstructured, gk schema.GroupKind, os []*owner, p fieldpath.Path, lv any, change string) (ok bool, borrowed *Actor, manager string) {
	ref := Ref{Group: gk.Group, Kind: gk.Kind, Namespace: live.GetNamespace(), Name: live.GetName()}
	for _, o := range os {
		var actor *Actor
		asked := false
		for i := range opts.Controllers {
			r := &opts.Controllers[i]
			if !r.matches(gk, o, p) || r.Autoscaled && (opts.Autoscaled == nil || !opts.Autoscaled(gk, ref.Namespace, ref.Name)) {
				continue
			}
			id := opts.identityOf(o.Manager, r)
			if opts.Events == nil || o.Subresource == "status" || len(id) == 0 {
				// Status writes are not in the audit events (the platform's policy and the
				// event reader leave them out), and a controller of no known identity cannot
				// be checked: the name is all there will ever be.
				opts.Excused.add(opts.Cluster, ref, o.Manager, false, time.Time{}, "")
				return true, nil, ""
			}
			fingerprint := Display(p) + "=" + fmt.Sprint(lv) // only with events: the hot path has none
			if !asked {
				f := Field{Path: Display(p), FieldPath: FieldPath(p), Live: lv, Change: change, Writer: o.writer()}
				actor, asked = opts.Events.WriterOf(live, &f), true
			}
			if actor == nil { // no event says (yet): the name is all there is
				opts.Excused.add(opts.Cluster, ref, o.Manager, false, o.Time, fingerprint)
				return true, nil, ""
			}
			if id.Matches(actor) {
				opts.Excused.add(opts.Cluster, ref, o.Manager, true, o.Time, fingerprint)
				return true, nil, ""
			}
			// Another rule for this manager may name the actor among its users.
		}
		if actor != nil {
			return false, actor, o.Manager
		}
	}
	return false, nil, ""
}

// HPAGVK and ScaledObjectGVK are the kinds whose scaleTargetRef says what is autoscaled.
var (
	HPAGVK          = schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}
	ScaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
)

// AutoscaledIn returns what Options.Autoscaled asks, answered from the live
// HorizontalPodAutoscalers (KEDA's ScaledObjects make one too), read once per namespace.
func AutoscaledIn(live LiveReader) func(gk schema.GroupKind, namespace, name string) bool {
	targets := map[string]map[string]bool{}
	return func(gk schema.GroupKind, namespace, name string) bool {
		t, ok := targets[namespace]
		if !ok {
			t = map[string]bool{}
			for _, h := range live.List(HPAGVK, namespace) {
				ref, _, _ := unstructured.NestedStringMap(h.Object, "spec", "scaleTargetRef")
				gv, _ := schema.ParseGroupVersion(ref["apiVersion"])
				t[gv.Group+"/"+ref["kind"]+"/"+ref["name"]] = true
			}
			// A ScaledObject scales its target even while KEDA has paused it and removed the HPA.
			for _, so := range live.List(ScaledObjectGVK, namespace) {
				ref, _, _ := unstructured.NestedStringMap(so.Object, "spec", "scaleTargetRef")
				gv, _ := schema.ParseGroupVersion(ref["apiVersion"])
				kind := ref["kind"]
				if kind == "" { // KEDA's default target
					kind = "Deployment"
				}
				if ref["apiVersion"] == "" { // KEDA's default group
					gv = schema.GroupVersion{Group: "apps", Version: "v1"}
				}
				t[gv.Group+"/"+kind+"/"+ref["name"]] = true
			}
			targets[namespace] = t
		}
		return t[gk.Group+"/"+gk.Kind+"/"+name]
	}
}

// trackingField is Argo CD's own bookkeeping, which it adds to what Git says when it syncs: the
// tracking annotation and, with label tracking, the instance label.
func trackingField(p fieldpath.Path) bool {
	if len(p) != 3 || p[0].FieldName == nil || *p[0].FieldName != "metadata" || p[1].FieldName == nil || p[2].FieldName == nil {
		return false
	}
	switch *p[1].FieldName + "/" + *p[2].FieldName {
	case "annotations/argocd.argoproj.io/tracking-id", "annotations/argocd.argoproj.io/installation-id",
		"labels/app.kubernetes.io/instance", "labels/argocd.argoproj.io/instance":
		return true
	}
	return false
}

// tracksItself says whether the tracking annotation at leaf is the one Argo CD gives l as an
// object of opts.Application (<app>:<group>/<kind>:<namespace>/<name>): Argo CD writes it on
// every object it syncs, under whatever manager its sync used (a Replace=true sync replaces the
// object as "argocd", not by server-side apply). Another value (copied from another object, or
// another Application's) is drift.
func (opts *Options) tracksItself(l *unstructured.Unstructured, leaf fieldpath.Path) bool {
	if opts.Application == "" || *leaf[2].FieldName != "argocd.argoproj.io/tracking-id" {
		return false
	}
	return trackedBy(l.GroupVersionKind(), l) == opts.Application
}

// countsForAdded keeps spec-like fields, labels and annotations; not status or bookkeeping.
func countsForAdded(p fieldpath.Path) bool {
	if len(p) == 0 || p[0].FieldName == nil {
		return false
	}
	switch *p[0].FieldName {
	case "status", "apiVersion", "kind":
		return false
	case "metadata":
		if len(p) < 3 || p[1].FieldName == nil || p[2].FieldName == nil {
			return false
		}
		if f := *p[1].FieldName; f != "labels" && f != "annotations" {
			return false
		}
		return *p[2].FieldName != "kubectl.kubernetes.io/last-applied-configuration"
	}
	return true
}

// firstUndeclared returns the field a writer added that holds the leaf p: the shortest prefix of p
// that desired does not declare, that the writer owns as a whole (a list item it created, a map it
// made) and under which no other writer owns anything; else p itself. So an annotation the
// controller-manager set on an object whose Git manifest has no annotations is that annotation,
// not the whole map, which holds the applier's tracking annotation too.
func firstUndeclared(desired map[string]any, p fieldpath.Path, w *owner, all []*owner) (fieldpath.Path, bool) {
	for i := 1; i <= len(p); i++ {
		if _, ok := valueAt(desired, p[:i]); ok {
			continue
		}
		for j := i; j < len(p); j++ {
			if w.fields().Has(p[:j]) && !othersUnder(w, all, p[:j]) {
				return p[:j], true
			}
		}
		return p, true
	}
	return nil, false
}

// othersUnder reports whether an owner other than w owns p or anything below it.
func othersUnder(w *owner, all []*owner, p fieldpath.Path) bool {
	for _, o := range all {
		if o == w {
			continue
		}
		found := false
		o.fields().Iterate(func(q fieldpath.Path) {
			if !found && len(q) >= len(p) && q[:len(p)].Equals(p) {
				found = true
			}
		})
		if found {
			return true
		}
	}
	return false
}
