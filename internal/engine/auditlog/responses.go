package auditlog

import (
	"container/list"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/llm-gitops/platform/internal/engine/argocd"
)

// heldResponse is the latest response held for an object: its diffable fields as compact JSON.
type heldResponse struct {
	key  Object
	uid  string
	at   time.Time
	raw  []byte
	elem *list.Element
}

func (h *heldResponse) size() int {
	return len(h.raw) + len(h.uid) + len(h.key.Group) + len(h.key.Resource) + len(h.key.Namespace) + len(h.key.Name) + 128
}

// responses holds the latest response per object, bounded in bytes (least recently written first
// out). It is used under Store.respMu.
type responses struct {
	max, bytes int
	byObj      map[Object]*heldResponse
	lru        *list.List // of *heldResponse, most recent at the front
	types      map[schema.GroupVersionKind]*typed.ParseableType
	paths      map[string]string // one string per path changes name, shared by the writes
}

// maxPaths bounds the paths interned; past it each change has a string of its own.
const maxPaths = 1 << 16

func (r *responses) intern(p string) string {
	if q, ok := r.paths[p]; ok {
		return q
	}
	if len(r.paths) < maxPaths {
		r.paths[p] = p
	}
	return p
}

func (r *responses) get(key Object) *heldResponse {
	if r.byObj == nil {
		r.byObj, r.lru, r.types, r.paths = map[Object]*heldResponse{}, list.New(), map[schema.GroupVersionKind]*typed.ParseableType{}, map[string]string{}
	}
	return r.byObj[key]
}

func (r *responses) drop(key Object) {
	if h := r.byObj[key]; h != nil {
		r.lru.Remove(h.elem)
		r.bytes -= h.size()
		delete(r.byObj, key)
	}
}

func (r *responses) put(key Object, uid string, at time.Time, raw []byte) {
	r.drop(key)
	h := &heldResponse{key: key, uid: uid, at: at, raw: raw}
	h.elem = r.lru.PushFront(h)
	r.byObj[key] = h
	r.bytes += h.size()
	for r.bytes > r.max && r.lru.Len() > 1 {
		r.drop(r.lru.Back().Value.(*heldResponse).key)
	}
}

// typeOf types a kind from the Kubernetes API schema compiled in (nil for a CRD: maps compare by
// key, lists as whole values).
func (r *responses) typeOf(gvk schema.GroupVersionKind) *typed.ParseableType {
	if pt, ok := r.types[gvk]; ok {
		return pt
	}
	pt := argocd.StaticSchema([]schema.GroupVersionKind{gvk}).Type(gvk)
	r.types[gvk] = pt
	return pt
}
