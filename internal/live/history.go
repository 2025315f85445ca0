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
// no managedFields entry owns any more — can be traced to the update that removed it. Informer
// objects are never mutated, so keeping them costs no copy.
type history struct {
	mu       sync.Mutex
	versions map[historyKey]*versions
}

// versions are an object's updates that changed content, newest first, and the resourceVersion
// of the newest update seen at all (status writes move only that).
type versions struct {
	list    []*unstructured.Unstructured
	current string
}

type historyKey struct {
	gk              schema.GroupKind
	namespace, name string
}

func keyOf(u *unstructured.Unstructured) historyKey {
	return historyKey{gk: u.GroupVersionKind().GroupKind(), namespace: u.GetNamespace(), name: u.GetName()}
}

// handler records updates and forgets deleted objects.
func (h *history) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			h.record(o, n)
		},
		DeleteFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				h.mu.Lock()
				delete(h.versions, keyOf(u))
				h.mu.Unlock()
			}
		},
	}
}

func (h *history) record(old, cur *unstructured.Unstructured) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.versions == nil {
		h.versions = map[historyKey]*versions{}
	}
	k := keyOf(cur)
	vs, ok := h.versions[k]
	if StatusOnly(old, cur) {
		// A controller's status write changes nothing a diff reads, so it takes no place in the
		// bounded history (a rollout's status updates would push the edit out).
		if ok && vs.current == old.GetResourceVersion() {
			vs.current = cur.GetResourceVersion()
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
		vs = &versions{list: []*unstructured.Unstructured{old}}
		h.versions[k] = vs
	}
	vs.list = append([]*unstructured.Unstructured{cur}, vs.list...)
	if len(vs.list) > historyDepth {
		vs.list = vs.list[:historyDepth]
	}
	vs.current = cur.GetResourceVersion()
}

// Versions returns the versions of an object the watch saw, newest first (the cached one
// included), or just the cached one when no update was seen.
func (c *Cache) Versions(gvk schema.GroupVersionKind, namespace, name string) []*unstructured.Unstructured {
	cur, ok := c.Get(gvk, namespace, name)
	if !ok {
		return nil
	}
	c.history.mu.Lock()
	defer c.history.mu.Unlock()
	return c.history.of(cur)
}

// of returns the versions of cur, newest first, when the history holds its line up to cur.
func (h *history) of(cur *unstructured.Unstructured) []*unstructured.Unstructured {
	vs := h.versions[keyOf(cur)]
	switch {
	case vs == nil || len(vs.list) == 0 || vs.current != cur.GetResourceVersion():
		return []*unstructured.Unstructured{cur}
	case vs.list[0].GetResourceVersion() == cur.GetResourceVersion():
		return append([]*unstructured.Unstructured(nil), vs.list...)
	default: // status writes since the last content change
		return append([]*unstructured.Unstructured{cur}, vs.list...)
	}
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
