package drift

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// removedBy names who removed p, from the versions of the object the watch saw (newest first):
// the managedFields entry the API server stamped in the update that took p away.
func removedBy(versions []*unstructured.Unstructured, p fieldpath.Path) *Writer {
	for i := 0; i+1 < len(versions); i++ {
		newer, older := versions[i], versions[i+1]
		if _, ok := valueAt(newer.Object, p); ok {
			continue
		}
		if _, ok := valueAt(older.Object, p); !ok {
			continue
		}
		if w := changedEntry(older.GetManagedFields(), newer.GetManagedFields()); w != nil {
			return w
		}
		return nil
	}
	return nil
}

// changedEntry returns the entry of the update's writer: the API server stamps a new time on
// the entry of the manager that wrote (an entry whose set only shrank lost fields to someone
// else and did not write). Among several, the latest.
func changedEntry(before, after []metav1.ManagedFieldsEntry) *Writer {
	var best *metav1.ManagedFieldsEntry
	for i := range after {
		e := &after[i]
		if e.Time == nil {
			continue
		}
		stamped := true
		for _, b := range before {
			if b.Manager == e.Manager && b.Operation == e.Operation && b.Subresource == e.Subresource {
				stamped = b.Time == nil || !b.Time.Equal(e.Time)
				break
			}
		}
		if stamped && (best == nil || e.Time.After(best.Time.Time)) {
			best = e
		}
	}
	if best == nil {
		return nil
	}
	return &Writer{Manager: best.Manager, Operation: string(best.Operation), Subresource: best.Subresource,
		Time: best.Time.UTC().Format(time.RFC3339)}
}

// OwnerOf returns the newest writer that owns exactly p on the live object (from managedFields),
// or nil when nobody does: who set the value the field has now.
func OwnerOf(live *unstructured.Unstructured, p FieldPath) *Writer {
	o := latest(ownersAt(owners(live.GetManagedFields()), p.Path()))
	if o == nil {
		return nil
	}
	w := o.writer()
	return &w
}

// CreatorOf returns the earliest writer of the live object: who made it.
func CreatorOf(live *unstructured.Unstructured) *Writer {
	var first *owner
	for _, o := range owners(live.GetManagedFields()) {
		if first == nil || o.Time.Before(first.Time) {
			first = o
		}
	}
	if first == nil {
		return nil
	}
	w := first.writer()
	return &w
}
