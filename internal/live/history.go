package live

import (
	"sync"

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
	versions map[historyKey][]*unstructured.Unstructured
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
		h.versions = map[historyKey][]*unstructured.Unstructured{}
	}
	k := keyOf(cur)
	vs, ok := h.versions[k]
	if !ok {
		if len(h.versions) >= historyObjects {
			for evict := range h.versions { // any one: the bound matters, not which
				delete(h.versions, evict)
				break
			}
		}
		vs = []*unstructured.Unstructured{old}
	}
	vs = append([]*unstructured.Unstructured{cur}, vs...)
	if len(vs) > historyDepth {
		vs = vs[:historyDepth]
	}
	h.versions[k] = vs
}

// Versions returns the versions of an object the watch saw, newest first (the cached one
// included), or just the cached one when no update was seen.
func (c *Cache) Versions(gvk schema.GroupVersionKind, namespace, name string) []*unstructured.Unstructured {
	cur, ok := c.Get(gvk, namespace, name)
	if !ok {
		return nil
	}
	c.history.mu.Lock()
	vs := c.history.versions[historyKey{gk: gvk.GroupKind(), namespace: namespace, name: name}]
	c.history.mu.Unlock()
	if len(vs) == 0 || vs[0].GetResourceVersion() != cur.GetResourceVersion() {
		return []*unstructured.Unstructured{cur}
	}
	return vs
}
