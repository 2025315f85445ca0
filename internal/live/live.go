// Package live keeps an informer cache (list + watch) of the live objects the audit compares:
// every kind the rendered revision holds, resolved through discovery, plus the kinds people
// create by hand. It only reads: get, list, watch.
package live

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
)

// Cache is a set of informers over dynamic resources.
type Cache struct {
	dyn       dynamic.Interface
	disc      discovery.DiscoveryInterface
	mapper    meta.ResettableRESTMapper
	watchDyn  dynamic.Interface
	watchMeta metadata.Interface
	mu        sync.RWMutex
	watchMu   sync.Mutex // serialises starting informers
	informers map[schema.GroupVersionKind]*watched
	upgrading map[schema.GroupVersionKind]*watched // full informers syncing to replace metadata ones
	scope     map[string]bool                      // namespaces watched; nil: all
	kindScope map[schema.GroupVersionKind][]string // kinds watched in other namespaces than scope
	ctx       context.Context
	history   history
	docsMu    sync.Mutex
	docs      map[string]*gvDoc
	missing   map[schema.GroupVersionKind]time.Time // kinds discovery lacked, and when
	resets    atomic.Int64

	watchStarts atomic.Int64
}

// KindError says a kind of the rendered revision is not served by the cluster (typically its CRD
// is not installed).
type KindError struct {
	GVK schema.GroupVersionKind
	Err error
}

func (e *KindError) Error() string {
	return fmt.Sprintf("kind %s (%s) is not served by the cluster: is its CRD installed? (%v)", e.GVK.Kind, e.GVK.GroupVersion(), e.Err)
}

func (e *KindError) Unwrap() error { return e.Err }

// RequestTimeout bounds each request that is not a list or watch (discovery, OpenAPI, direct
// reads) unless the rest.Config sets its own.
var RequestTimeout = 30 * time.Second

// New connects to the cluster behind cfg and checks that it answers. Informers list and watch
// with no client timeout — a timeout on the client would cut every watch when it expires and
// abort a list that takes longer — and end with the cache's context; other requests are bounded
// by RequestTimeout.
func New(ctx context.Context, cfg *rest.Config) (*Cache, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0
	c := &Cache{}
	watchCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countWatches{rt, &c.watchStarts} })
	if cfg.Timeout == 0 {
		cfg.Timeout = RequestTimeout
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	watchDyn, err := dynamic.NewForConfig(watchCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	watchMeta, err := metadata.NewForConfig(watchCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 10 * time.Second
	pdc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	if _, err := pdc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("cluster %s unreachable: %w", cfg.Host, err)
	}
	c.dyn, c.disc, c.ctx = dyn, dc, ctx
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	c.watchDyn, c.watchMeta = watchDyn, watchMeta
	c.informers = map[schema.GroupVersionKind]*watched{}
	c.upgrading = map[schema.GroupVersionKind]*watched{}
	c.missing = map[schema.GroupVersionKind]time.Time{}
	return c, nil
}

// ScopeTo watches namespaced kinds only in namespaces (one informer per namespace), and the
// kinds of perKind only in theirs: the auditor then needs read access there only (Secrets
// included). Call it before the first Watch; no namespaces means every namespace. Objects of
// other namespaces are not seen: Covers says which namespaces are.
func (c *Cache) ScopeTo(namespaces []string, perKind map[schema.GroupVersionKind][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(namespaces) > 0 {
		c.scope = map[string]bool{}
		for _, ns := range namespaces {
			c.scope[ns] = true
		}
	}
	c.kindScope = perKind
}

// Covers says whether objects of namespace are watched (always true when the cache is not scoped).
func (c *Cache) Covers(namespace string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.scope == nil || namespace == "" || c.scope[namespace]
}

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

// newInformer makes an informer of one resource in one namespace (or all): of full objects, or
// of their metadata.
func (c *Cache) newInformer(gvr schema.GroupVersionResource, namespace string, metaOnly bool) cache.SharedIndexInformer {
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	if metaOnly {
		return metadatainformer.NewFilteredMetadataInformer(c.watchMeta, gvr, namespace, 0, indexers, nil).Informer()
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(c.watchDyn, gvr, namespace, 0, indexers, nil).Informer()
	_ = inf.SetTransform(compact) // fails only on a started informer
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

// WatchStarts counts the watches the API server accepted: one per informer, plus one per
// reconnect (an API server restart, a watch the server ended).
func (c *Cache) WatchStarts() int64 { return c.watchStarts.Load() }

// countWatches counts the watch requests (?watch=true) the API server accepted: attempts that
// fail while it is unreachable are not reconnects.
type countWatches struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countWatches) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusOK && r.URL.Query().Get("watch") == "true" {
		t.n.Add(1)
	}
	return resp, err
}

// Mapping resolves a kind to its resource through discovery.
func (c *Cache) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m, nil
	}
	// Discovery is asked again (a CRD installed since) at most once per MissingKindTTL per kind:
	// an env whose render holds a kind the cluster lacks does not rediscover at every audit.
	c.mu.Lock()
	at, known := c.missing[gvk]
	fresh := known && time.Since(at) < MissingKindTTL
	c.mu.Unlock()
	if !fresh {
		c.resets.Add(1)
		c.mapper.Reset()
		if m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			c.mu.Lock()
			delete(c.missing, gvk)
			c.mu.Unlock()
			return m, nil
		}
		c.mu.Lock()
		c.missing[gvk] = time.Now()
		c.mu.Unlock()
	}
	return nil, &KindError{GVK: gvk, Err: err}
}

// MissingKindTTL is how long a kind discovery did not find is taken as still missing.
var MissingKindTTL = 30 * time.Second

// DiscoveryResets counts how often a missing kind made the cache ask discovery again.
func (c *Cache) DiscoveryResets() int64 { return c.resets.Load() }

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
		w = &watched{gvk: gvk, meta: !must && MetadataOnly[gvk], stop: make(chan struct{})}
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
		for _, inf := range w.each() {
			if !w.meta {
				if _, err := inf.AddEventHandler(c.history.handler()); err != nil {
					return fmt.Errorf("watch %s: %w", gvk.Kind, err)
				}
			}
			go inf.Run(w.stop)
		}
		go func() { // the informers end with the cache, or when replaced
			select {
			case <-c.ctx.Done():
				w.close()
			case <-w.stop:
			}
		}()
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
	ok := cache.WaitForCacheSync(ctx.Done(), synced...)
	for _, w := range upgrades {
		if w.hasSynced() {
			c.publish(w)
		}
	}
	if !ok {
		var late []schema.GroupVersionKind
		for i, ok := range synced {
			if !ok() {
				late = append(late, named[i])
			}
		}
		return &NotSyncedError{Kinds: late, Err: context.Cause(ctx)}
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

// Kinds lists the watched kinds.
func (c *Cache) Kinds() []schema.GroupVersionKind {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]schema.GroupVersionKind, 0, len(c.informers))
	for gvk := range c.informers {
		out = append(out, gvk)
	}
	return out
}

// Informers returns the informers of a watched kind (one per namespace when the cache is
// scoped), for event handlers (the daemon).
func (c *Cache) Informers(gvk schema.GroupVersionKind) []cache.SharedIndexInformer {
	c.mu.RLock()
	defer c.mu.RUnlock()
	w, ok := c.informers[gvk]
	if !ok {
		return nil
	}
	return w.each()
}

// Get returns a live object from the cache.
func (c *Cache) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool) {
	c.mu.RLock()
	w, ok := c.informers[gvk]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	inf, ok := w.in(namespace)
	if !ok {
		return nil, false
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, exists, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return nil, false
	}
	return AsUnstructured(gvk, obj)
}

// List returns the cached objects of a kind in a namespace ("" for a cluster-scoped kind).
func (c *Cache) List(gvk schema.GroupVersionKind, namespace string) []*unstructured.Unstructured {
	c.mu.RLock()
	w, ok := c.informers[gvk]
	c.mu.RUnlock()
	if !ok {
		return nil
	}
	inf, ok := w.in(namespace)
	if !ok {
		return nil
	}
	objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := AsUnstructured(gvk, o); ok {
			out = append(out, u)
		}
	}
	return out
}

// GetDirect reads one object from the API server, bypassing the cache (the Argo CD Application).
func (c *Cache) GetDirect(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	m, err := c.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.dyn.Resource(m.Resource).Namespace(namespace)
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", gvk.Kind, namespace, name, err)
	}
	return u, nil
}
