package live

import (
	"bytes"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Bounds of the version history: versions kept per object, objects kept in all.
const (
	historyDepth   = 4
	historyObjects = 4096
)

// history keeps the last versions of objects the watch saw updated, so a removed field — which
// no managedFields entry owns any more — can be traced to the update that removed it. It keeps
// the informers' stored objects (their JSON), which are never mutated, so keeping them costs no
// copy; a version is decoded when read.
type history struct {
	mu       sync.Mutex
	versions map[historyKey]*versions
}

// versions are an object's updates that changed content, newest first, and the resourceVersion
// of the newest update seen at all (status writes move only that).
type versions struct {
	list    []*stored
	current string
}

type historyKey struct {
	gk              schema.GroupKind
	namespace, name string
}

func keyOf(s *stored) historyKey {
	return historyKey{gk: s.GroupVersionKind().GroupKind(), namespace: s.Namespace, name: s.Name}
}

// storedOf returns an informer's object in its stored form.
func storedOf(obj any) (*stored, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	c, err := compact(obj)
	if err != nil {
		return nil, false
	}
	s, ok := c.(*stored)
	return s, ok
}

// handler records updates and forgets deleted objects.
func (h *history) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := storedOf(oldObj)
			n, ok2 := storedOf(newObj)
			if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
				return
			}
			h.record(o, n)
		},
		DeleteFunc: func(obj any) {
			if s, ok := storedOf(obj); ok {
				h.mu.Lock()
				delete(h.versions, keyOf(s))
				h.mu.Unlock()
			}
		},
	}
}

func (h *history) record(old, cur *stored) {
	statusOnly := false
	if o, err := old.unstructuredOf(); err == nil {
		if c, err := cur.unstructuredOf(); err == nil {
			statusOnly = StatusOnly(o, c)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.versions == nil {
		h.versions = map[historyKey]*versions{}
	}
	k := keyOf(cur)
	vs, ok := h.versions[k]
	if statusOnly {
		// A controller's status write changes nothing a diff reads, so it takes no place in the
		// bounded history (a rollout's status updates would push the edit out).
		if ok && vs.current == old.ResourceVersion {
			vs.current = cur.ResourceVersion
		}
		return
	}
	if !ok {
		if len(h.versions) >= historyObjects {
			for evict := range h.versions { // any one: the bound matters, not which
				delete(h.versions, evict)
				break
			}
		}
		vs = &versions{list: []*stored{old}}
		h.versions[k] = vs
	}
	vs.list = append([]*stored{cur}, vs.list...)
	if len(vs.list) > historyDepth {
		vs.list = vs.list[:historyDepth]
	}
	vs.current = cur.ResourceVersion
}

// Versions returns the versions of an object the watch saw, newest first (the cached one
// included), or nil when the watch saw no update of it: most objects, which then cost no decoding.
func (c *Cache) Versions(gvk schema.GroupVersionKind, namespace, name string) []*unstructured.Unstructured {
	list, current := c.history.line(historyKey{gk: gvk.GroupKind(), namespace: namespace, name: name})
	if len(list) == 0 {
		return nil
	}
	cur, ok := c.Get(gvk, namespace, name)
	if !ok {
		return nil
	}
	return versionsOf(cur, list, current)
}

// of returns the versions of cur, newest first, when the history holds its line up to cur.
func (h *history) of(cur *unstructured.Unstructured) []*unstructured.Unstructured {
	list, current := h.line(historyKey{gk: cur.GroupVersionKind().GroupKind(), namespace: cur.GetNamespace(), name: cur.GetName()})
	return versionsOf(cur, list, current)
}

// line returns a copy of an object's recorded versions and the resourceVersion of the newest
// update seen.
func (h *history) line(k historyKey) ([]*stored, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	vs := h.versions[k]
	if vs == nil {
		return nil, ""
	}
	return append([]*stored(nil), vs.list...), vs.current
}

// versionsOf decodes an object's recorded versions (newest first; current is the resourceVersion
// of the newest update seen) behind cur, outside the history's lock.
func versionsOf(cur *unstructured.Unstructured, list []*stored, current string) []*unstructured.Unstructured {
	switch {
	case len(list) == 0 || current != cur.GetResourceVersion():
		return []*unstructured.Unstructured{cur}
	case list[0].ResourceVersion == cur.GetResourceVersion():
		list = list[1:]
	default: // status writes since the last content change
	}
	out := []*unstructured.Unstructured{cur}
	for _, s := range list {
		if u, err := s.unstructuredOf(); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// StatusOnly says an update wrote only through the status subresource: the only managedFields
// entries stamped or changed are status ones, and the generation did not move. An update that
// stamped no entry at all (a pure removal) is not status-only.
func StatusOnly(old, cur *unstructured.Unstructured) bool {
	if old.GetGeneration() != cur.GetGeneration() {
		return false
	}
	type id struct{ manager, operation, subresource string }
	before := map[id]metav1.ManagedFieldsEntry{}
	for _, e := range old.GetManagedFields() {
		before[id{e.Manager, string(e.Operation), e.Subresource}] = e
	}
	changed := 0
	for _, e := range cur.GetManagedFields() {
		b, ok := before[id{e.Manager, string(e.Operation), e.Subresource}]
		if ok && b.Time.Equal(e.Time) && fieldsEqual(b.FieldsV1, e.FieldsV1) {
			continue
		}
		if e.Subresource != "status" {
			return false
		}
		changed++
	}
	return changed > 0
}

func fieldsEqual(a, b *metav1.FieldsV1) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Raw, b.Raw)
}
