package drift

import (
	"bytes"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// owner is one managedFields entry, with its field set decoded on demand.
type owner struct {
	Manager, Operation, Subresource string
	Time                            time.Time
	raw                             []byte
	members                         []path // every member of the set
	leaves                          []path
	decoded                         bool
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

// decode parses the FieldsV1 set once.
func (o *owner) decode() {
	if o.decoded {
		return
	}
	o.decoded = true
	if len(o.raw) == 0 {
		return
	}
	var set fieldpath.Set
	if err := set.FromJSON(bytes.NewReader(o.raw)); err != nil {
		return
	}
	set.Iterate(func(p fieldpath.Path) { o.members = append(o.members, fromFieldPath(p)) })
	set.Leaves().Iterate(func(p fieldpath.Path) { o.leaves = append(o.leaves, fromFieldPath(p)) })
}

// ownerOf names who last wrote p: the entry with the most specific member covering p (or a
// member inside p), the latest on ties. Nobody owns a field that was removed; then the owner of
// its nearest ancestor answers, as the writer that replaced the list or map holding it.
func ownerOf(os []*owner, p path) *owner {
	var best *owner
	bestScore := -1
	for _, o := range os {
		o.decode()
		for _, m := range o.members {
			score := -1
			switch {
			case covers(m, p):
				score = len(m)
			case covers(p, m):
				score = len(p)
			}
			if score < 0 {
				continue
			}
			if score > bestScore || score == bestScore && best != nil && o.Time.After(best.Time) {
				best, bestScore = o, score
			}
		}
	}
	if best != nil && bestScore > 1 {
		return best
	}
	// Only a top-level field (or nothing) covers p: fall back to the latest non-apply writer.
	var latest *owner
	for _, o := range os {
		if o.Operation == string(metav1.ManagedFieldsOperationUpdate) && o.Subresource == "" && (latest == nil || o.Time.After(latest.Time)) {
			latest = o
		}
	}
	if latest != nil {
		return latest
	}
	return best
}
