package daemon

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// liveObject is the watch's copy of an object of cluster ("" for Argo CD's own).
func (d *Daemon) liveObject(cluster, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, bool) {
	c := d.conn.Cache()
	if cluster != "" {
		if d.fleet == nil {
			return nil, false
		}
		c = d.fleet.Caches()[cluster]
	}
	if c == nil {
		return nil, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false
	}
	return c.Get(gv.WithKind(kind), namespace, name)
}

// informerHooks is the part that subscribes the audits to the informers they started. Only the
// reconcile worker uses it, between audits: it has no lock.
type informerHooks struct {
	// hook subscribes to one informer; fromStart says it has not run yet, so its initial list
	// (read by the audit that waits for it) is no change to audit.
	hook func(gvk schema.GroupVersionKind, inf cache.SharedIndexInformer, fromStart bool)

	mu     sync.Mutex // the audits' workers add at once
	hooked map[cache.SharedIndexInformer]bool
}

func newInformerHooks(hook func(schema.GroupVersionKind, cache.SharedIndexInformer, bool)) *informerHooks {
	return &informerHooks{hook: hook, hooked: map[cache.SharedIndexInformer]bool{}}
}

// add subscribes to every informer of c not subscribed to yet: its Applications, the kinds every
// audit reads, and the kinds the audits started (new ones too: a kind's informers can be replaced).
func (h *informerHooks) add(c *live.Cache) {
	type informer struct {
		gvk schema.GroupVersionKind
		inf cache.SharedIndexInformer
	}
	// Read from the cache before taking the lock: starting holds it under the cache's own.
	var infs []informer
	kinds := append([]schema.GroupVersionKind{argocd.ApplicationGVK}, drift.DefaultExtraKinds...)
	for _, gvk := range append(kinds, c.Kinds()...) {
		for _, inf := range c.Informers(gvk) {
			infs = append(infs, informer{gvk, inf})
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, i := range infs {
		if !h.hooked[i.inf] {
			h.hooked[i.inf] = true
			h.hook(i.gvk, i.inf, false)
		}
	}
}

// starting subscribes to an informer the cache is about to run (live.Cache.SetInformerHook):
// every event after its initial list is a change. The informers started after an audit need
// no replay of what that audit read.
func (h *informerHooks) starting(gvk schema.GroupVersionKind, inf cache.SharedIndexInformer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.hooked[inf] {
		h.hooked[inf] = true
		h.hook(gvk, inf, true)
	}
}

// forget forgets the informers of a cache that is being stopped: they, and their objects, are
// no longer referenced.
func (h *informerHooks) forget(c *live.Cache) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, gvk := range c.Kinds() {
		for _, inf := range c.Informers(gvk) {
			delete(h.hooked, inf)
		}
	}
}

// hook subscribes to one informer of gvk (see changes).
func (d *Daemon) hook(gvk schema.GroupVersionKind, inf cache.SharedIndexInformer, fromStart bool) {
	_, _ = inf.AddEventHandler(changes(gvk, fromStart, d.touch, d.touchRef))
}

// changes is the handler of one informer of gvk: a change to an object is touched (status-only
// writes and resyncs are ignored); a change to an Application's spec or synced revision touches
// the Application, and its resources whose verdict moved are touched by ref. An informer hooked
// before it runs (fromStart) skips its initial list: the audit that started it waits for that
// list and reads it. One hooked later gets its store replayed as additions, each touched, since
// it may hold changes no handler saw.
func changes(gvk schema.GroupVersionKind, fromStart bool, touch func(schema.GroupVersionKind, any), touchRef func(drift.Ref)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial && fromStart {
				return
			}
			touch(gvk, obj)
		},
		UpdateFunc: func(old, cur any) {
			if live.SameVersion(old, cur) {
				return // a resync or a relist: nothing changed (and nothing decoded)
			}
			o, ok1 := live.AsUnstructured(gvk, old)
			n, ok2 := live.AsUnstructured(gvk, cur)
			if ok1 && ok2 && !changed(gvk, o, n) {
				return
			}
			if ok1 && ok2 && gvk.GroupKind() == argocd.ApplicationGVK.GroupKind() {
				// The resources whose verdict moved are re-audited; the Application too when
				// what it says of the desired state or a sync moved.
				for _, r := range verdictsChanged(o, n) {
					touchRef(r)
				}
				if !appStateChanged(o, n) {
					return
				}
			}
			touch(gvk, cur)
		},
		DeleteFunc: func(obj any) { touch(gvk, obj) },
	}
}

// changed says whether an update can change a verdict: not a resync (same resourceVersion) and
// not a write of status alone — except an Application's synced revision, which is the desired state.
func changed(gvk schema.GroupVersionKind, old, cur *unstructured.Unstructured) bool {
	if old.GetResourceVersion() == cur.GetResourceVersion() {
		return false
	}
	if gvk.GroupKind() == argocd.ApplicationGVK.GroupKind() {
		// Argo CD's Application has no status subresource: every reconcile (reconciledAt, health)
		// writes the main resource and bumps the generation. Only the spec, the compared and
		// synced revision(s), the state of a sync and Argo CD's verdicts change what the audit says.
		return appStateChanged(old, cur) || len(verdictsChanged(old, cur)) > 0
	}
	return !live.StatusOnly(old, cur)
}

// appStateChanged says whether what an Application says about the env's desired state or the
// state of a sync changed: the spec, its metadata (an app-of-apps audits it; a skip-reconcile
// annotation or a removed finalizer is a hand edit), the compared and synced revisions, the operation's phase
// and revision, the conditions (a comparison error).
func appStateChanged(old, cur *unstructured.Unstructured) bool {
	for _, path := range [][]string{{"spec"}, {"operation"}, {"metadata", "labels"}, {"metadata", "annotations"}, {"metadata", "finalizers"},
		{"status", "sync", "revision"}, {"status", "sync", "revisions"},
		{"status", "history"}, {"status", "operationState", "phase"}, {"status", "operationState", "syncResult", "revision"},
		{"status", "conditions"}} {
		o, _, _ := unstructured.NestedFieldNoCopy(old.Object, path...)
		n, _, _ := unstructured.NestedFieldNoCopy(cur.Object, path...)
		if !equality.Semantic.DeepEqual(o, n) {
			return true
		}
	}
	return false
}

// verdictsChanged returns the resources whose verdict in status.resources differs between two
// versions of an Application (listed in one only, or with another sync status).
func verdictsChanged(old, cur *unstructured.Unstructured) []drift.Ref {
	was, now := resourceStatuses(old), resourceStatuses(cur)
	var out []drift.Ref
	for r, st := range now {
		if was[r] != st {
			out = append(out, r)
		}
	}
	for r := range was {
		if _, ok := now[r]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// resourceStatuses maps each resource of an Application's status.resources to its sync status.
func resourceStatuses(app *unstructured.Unstructured) map[drift.Ref]string {
	rs, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	out := make(map[drift.Ref]string, len(rs))
	for _, r := range rs {
		m, _ := r.(map[string]any)
		str := func(k string) string { v, _ := m[k].(string); return v }
		out[drift.Ref{Group: str("group"), Kind: str("kind"), Namespace: str("namespace"), Name: str("name")}] = str("status")
	}
	return out
}
