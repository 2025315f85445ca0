package live

// The informers behind the cache: one kind's informers, starting and publishing them, and how
// their objects are read.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// watched is one kind's informers: one over every namespace (or a cluster-scoped kind), or one
// per namespace when the cache is scoped.
type watched struct {
	all  cache.SharedIndexInformer
	byNS map[string]cache.SharedIndexInformer
	// meta: the informers hold metadata only (PartialObjectMetadata): a kind watched only to find
	// objects made by hand (MetadataOnly), whose contents the audit never reads.
	meta   bool
	gvk    schema.GroupVersionKind
	stop   chan struct{}
	closed sync.Once
}

func (w *watched) each() []cache.SharedIndexInformer {
	if w.all != nil {
		return []cache.SharedIndexInformer{w.all}
	}
	out := make([]cache.SharedIndexInformer, 0, len(w.byNS))
	for _, inf := range w.byNS {
		out = append(out, inf)
	}
	return out
}

func (w *watched) hasSynced() bool {
	for _, inf := range w.each() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// in returns the informer holding objects of namespace.
func (w *watched) in(namespace string) (cache.SharedIndexInformer, bool) {
	if w.all != nil {
		return w.all, true
	}
	inf, ok := w.byNS[namespace]
	return inf, ok
}

// publish makes w, synced, the informers of its kind, and stops those it replaces.
func (c *Cache) publish(w *watched) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.upgrading[w.gvk] != w {
		return // published by another Watch
	}
	delete(c.upgrading, w.gvk)
	c.mu.Lock()
	old := c.informers[w.gvk]
	c.informers[w.gvk] = w
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
}

// decodedKinds are held decoded rather than as JSON: few objects, read at every event. Argo CD's
// Application (one per env, its status listing every resource: 1.5 MB of JSON at 10,000) is read
// several times per reconcile.
var decodedKinds = map[schema.GroupResource]bool{{Group: "argoproj.io", Resource: "applications"}: true}

// newInformer makes an informer of one resource in one namespace (or all): of full objects, or
// of their metadata.
func (c *Cache) newInformer(gvr schema.GroupVersionResource, namespace string, metaOnly bool) cache.SharedIndexInformer {
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	if metaOnly {
		return metadatainformer.NewFilteredMetadataInformer(c.watchMeta, gvr, namespace, 0, indexers, nil).Informer()
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(c.watchDyn, gvr, namespace, 0, indexers, nil).Informer()
	if !decodedKinds[gvr.GroupResource()] {
		_ = inf.SetTransform(compact) // fails only on a started informer
	}
	return inf
}

// close stops the informers (once).
func (w *watched) close() { w.closed.Do(func() { close(w.stop) }) }

// AsUnstructured returns an informer's object as the audit reads it: a stored object decoded
// afresh (the caller may change it); a metadata-only object (PartialObjectMetadata) becomes an
// Unstructured of gvk holding only its metadata; a deleted object's last known state is unwrapped.
func AsUnstructured(gvk schema.GroupVersionKind, obj any) (*unstructured.Unstructured, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *stored:
		u, err := o.unstructuredOf()
		return u, err == nil
	case *unstructured.Unstructured:
		return o, true
	case *metav1.PartialObjectMetadata:
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.ObjectMeta)
		if err != nil {
			return nil, false
		}
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": m}}
		u.SetGroupVersionKind(gvk)
		return u, true
	}
	return nil, false
}

// Identity returns the namespace and name of an informer's object (a deleted object's last
// known state included) without decoding it.
func Identity(obj any) (namespace, name string, ok bool) {
	if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = t.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", false
	}
	return m.GetNamespace(), m.GetName(), true
}

// SameVersion says whether two informer objects are the same version of an object (same
// resourceVersion), without decoding them: a relist hands every object to the update handlers.
func SameVersion(a, b any) bool {
	ma, errA := meta.Accessor(a)
	mb, errB := meta.Accessor(b)
	return errA == nil && errB == nil && ma.GetResourceVersion() != "" && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// namespacesOf returns the namespaces a namespaced kind is watched in (nil: all of them).
func (c *Cache) namespacesOf(gvk schema.GroupVersionKind) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ns, ok := c.kindScope[gvk]; ok {
		return ns
	}
	if c.scope == nil {
		return nil
	}
	out := make([]string, 0, len(c.scope))
	for ns := range c.scope {
		out = append(out, ns)
	}
	return out
}

// MetadataOnly are the kinds watched for their metadata alone while no audit needs their
// contents: a Secret Git does not declare is searched for hand-made copies by its managedFields
// and owners, so its data never reaches the auditor's memory. Once a render declares the kind,
// its informers are replaced by full ones.
var MetadataOnly = map[schema.GroupVersionKind]bool{{Version: "v1", Kind: "Secret"}: true}

// Watch starts informers for the kinds (required ones fail with a *KindError when not served;
// optional ones are skipped) and waits until their caches are synced.
func (c *Cache) Watch(ctx context.Context, required, optional []schema.GroupVersionKind) error {
	// Concurrent calls (an audit prefetching the usual kinds while it renders) each wait for
	// every kind they name, whoever started its informer.
	var synced []cache.InformerSynced
	var named []schema.GroupVersionKind // the kinds behind synced, in order
	var upgrades []*watched             // full informers to publish once synced
	add := func(gvk schema.GroupVersionKind, must bool) error {
		c.mu.RLock()
		w, ok := c.informers[gvk]
		c.mu.RUnlock()
		if ok && !(w.meta && must) {
			synced, named = append(synced, w.hasSynced), append(named, gvk)
			return nil
		}
		m, err := c.Mapping(gvk)
		if err != nil {
			if must {
				return err
			}
			return nil
		}
		c.watchMu.Lock()
		defer c.watchMu.Unlock()
		if w, ok := c.informers[gvk]; ok && !(w.meta && must) { // added meanwhile
			synced, named = append(synced, w.hasSynced), append(named, gvk)
			return nil
		}
		if up, ok := c.upgrading[gvk]; ok && must { // full informers already syncing
			synced, named = append(synced, up.hasSynced), append(named, gvk)
			upgrades = append(upgrades, up)
			return nil
		}
		old := c.informers[gvk]
		w = c.newWatched(gvk, m, must)
		if err := c.runWatched(w, m, gvk); err != nil {
			return err
		}
		go c.closeWith(w) // the informers end with the cache, or when replaced
		if old != nil {
			// Metadata informers replaced by full ones: readers keep the old until the new have
			// synced (an empty store would read as every Secret gone).
			c.upgrading[gvk] = w
			upgrades = append(upgrades, w)
		} else {
			c.mu.Lock()
			c.informers[gvk] = w
			c.mu.Unlock()
		}
		synced, named = append(synced, w.hasSynced), append(named, gvk)
		return nil
	}
	for _, gvk := range required {
		if err := add(gvk, true); err != nil {
			return err
		}
	}
	for _, gvk := range optional {
		if err := add(gvk, false); err != nil {
			return err
		}
	}
	// The wait ends with the caller's context, or with the cache (stopped meanwhile: its
	// informers will never sync).
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(c.ctx, func() { cancel(errors.New("live cache stopped")) })()
	ok := cache.WaitForCacheSync(wctx.Done(), synced...)
	for _, w := range upgrades {
		if w.hasSynced() {
			c.publish(w)
		}
	}
	if !ok {
		return &NotSyncedError{Kinds: lateKinds(synced, named), Err: context.Cause(wctx)}
	}
	return nil
}

// closeWith closes w's informers when the cache ends, unless w is stopped first (replaced).
func (c *Cache) closeWith(w *watched) {
	select {
	case <-c.ctx.Done():
		w.close()
	case <-w.stop:
	}
}

// lateKinds is the kinds of named whose informer in synced has not synced.
func lateKinds(synced []cache.InformerSynced, named []schema.GroupVersionKind) []schema.GroupVersionKind {
	var late []schema.GroupVersionKind
	for i, ok := range synced {
		if !ok() {
			late = append(late, named[i])
		}
	}
	return late
}

// newWatched is the informers of gvk, mapped to m: of metadata only when not must and gvk is
// read so, one for all namespaces or one for each namespace the cache watches gvk in.
func (c *Cache) newWatched(gvk schema.GroupVersionKind, m *meta.RESTMapping, must bool) *watched {
	w := &watched{gvk: gvk, meta: !must && MetadataOnly[gvk], stop: make(chan struct{})}
	var nss []string
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		nss = c.namespacesOf(gvk)
	}
	if nss == nil {
		w.all = c.newInformer(m.Resource, metav1.NamespaceAll, w.meta)
	} else {
		w.byNS = map[string]cache.SharedIndexInformer{}
		for _, ns := range nss {
			w.byNS[ns] = c.newInformer(m.Resource, ns, w.meta)
		}
	}
	return w
}

// runWatched runs each informer of w, the full ones of a kind not decoded elsewhere recording
// their events in the cache's history.
func (c *Cache) runWatched(w *watched, m *meta.RESTMapping, gvk schema.GroupVersionKind) error {
	for _, inf := range w.each() {
		if !w.meta && !decodedKinds[m.Resource.GroupResource()] {
			if _, err := inf.AddEventHandler(c.history.handler()); err != nil {
				return fmt.Errorf("watch %s: %w", gvk.Kind, err)
			}
		}
		if c.onInformer != nil {
			c.onInformer(gvk, inf)
		}
		go inf.Run(w.stop)
	}
	return nil
}

// NotSyncedError names the kinds whose list did not complete in time (forbidden, too slow, the
// API server unreachable); their informers keep trying.
type NotSyncedError struct {
	Kinds []schema.GroupVersionKind
	Err   error
}

func (e *NotSyncedError) Error() string {
	names := make([]string, len(e.Kinds))
	for i, k := range e.Kinds {
		names[i] = k.Kind + "." + k.Group
		if k.Group == "" {
			names[i] = k.Kind
		}
	}
	return fmt.Sprintf("live cache: kinds not synced: %s (%v)", strings.Join(names, ", "), e.Err)
}

func (e *NotSyncedError) Unwrap() error { return e.Err }
