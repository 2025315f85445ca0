package policy

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// paramStore builds an informer-like store over the loaded objects of the param kind, for
// generic.CollectParams. The kind's scope is the API server's (RESTMapper); for a kind it does
// not serve, the kind is namespaced if a loaded param or a paramRef has a namespace.
func (s *Set) paramStore(pk *admissionregistrationv1.ParamKind, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) (informers.GenericInformer, meta.RESTScope) {
	gv, _ := schema.ParseGroupVersion(pk.APIVersion)
	gvk := gv.WithKind(pk.Kind)
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	namespaced := false
	for _, o := range s.params[gvk] {
		_ = indexer.Add(o)
		if o.GetNamespace() != "" {
			namespaced = true
		}
	}
	for _, b := range bindings {
		if b.Spec.ParamRef != nil && b.Spec.ParamRef.Namespace != "" {
			namespaced = true
		}
	}
	var scope meta.RESTScope = meta.RESTScopeRoot
	if namespaced {
		scope = meta.RESTScopeNamespace
	}
	if m, err := RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		gvr, scope = m.Resource, m.Scope
	}
	return &staticInformer{lister: cache.NewGenericLister(indexer, gvr.GroupResource())}, scope
}

// staticInformer is a synced, never-changing informers.GenericInformer over a fixed store.
type staticInformer struct {
	lister cache.GenericLister
}

func (i *staticInformer) Informer() cache.SharedIndexInformer { return syncedInformer{} }

func (i *staticInformer) Lister() cache.GenericLister { return i.lister }

// syncedInformer only answers HasSynced, the one method CollectParams calls.
type syncedInformer struct {
	cache.SharedIndexInformer
}

func (syncedInformer) HasSynced() bool { return true }
