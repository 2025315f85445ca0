// Package live keeps an informer cache (list + watch) of the live objects the audit compares:
// every kind the rendered revision holds, resolved through discovery, plus the kinds people
// create by hand. It only reads: get, list, watch.
package live

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
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

	// onInformer, when set, is called with each informer before it runs (SetInformerHook).
	onInformer func(schema.GroupVersionKind, cache.SharedIndexInformer)

	serverMu sync.Mutex
	server   *Server
	serverAt time.Time
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

// SetInformerHook has hook called with each informer the cache starts, before it runs, so that
// a handler it adds sees the informer's initial list as such (isInInitialList) rather than as a
// replay of the store. Call it before the first Watch.
func (c *Cache) SetInformerHook(hook func(schema.GroupVersionKind, cache.SharedIndexInformer)) {
	c.onInformer = hook
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

// Covers says whether objects of kind gvk in namespace are watched (always true when the cache
// is not scoped): a kind ScopeTo gives namespaces of its own is watched in those alone.
func (c *Cache) Covers(gvk schema.GroupVersionKind, namespace string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if namespace == "" {
		return true
	}
	if nss, ok := c.kindScope[gvk]; ok {
		return slices.Contains(nss, namespace)
	}
	return c.scope == nil || c.scope[namespace]
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
	return c.ListWhere(gvk, namespace, nil)
}

// ListWhere is List of the objects keep accepts (nil: all), judged on their metadata before
// they are decoded: name, namespace, UID, labels, owner references and resourceVersion.
func (c *Cache) ListWhere(gvk schema.GroupVersionKind, namespace string, keep func(metav1.Object) bool) []*unstructured.Unstructured {
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
		if keep != nil {
			if m, err := meta.Accessor(o); err != nil || !keep(m) {
				continue
			}
		}
		if u, ok := AsUnstructured(gvk, o); ok {
			out = append(out, u)
		}
	}
	return out
}

// direct is the API server's resource of gvk, in namespace when the kind is namespaced.
func (c *Cache) direct(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := c.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(namespace), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

// ListDirect lists the objects of gvk in namespace matching selector (a label selector; "" for
// all) from the API server, bypassing the cache: the Applications of an env's selection, those an
// ApplicationSet generated. It pages through the list.
func (c *Cache) ListDirect(ctx context.Context, gvk schema.GroupVersionKind, namespace, selector string) ([]*unstructured.Unstructured, error) {
	ri, err := c.direct(gvk, namespace)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s in %s: %w", gvk.Kind, namespace, err)
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// GetDirect reads one object from the API server, bypassing the cache (the Argo CD Application).
func (c *Cache) GetDirect(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	ri, err := c.direct(gvk, namespace)
	if err != nil {
		return nil, err
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", gvk.Kind, namespace, name, err)
	}
	return u, nil
}
