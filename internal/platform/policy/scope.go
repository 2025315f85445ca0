package policy

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// served.json is the API server's discovery (kinds, resources, scopes) at the Kubernetes
// version the project pins, with the upstream CRDs of testcluster.UpstreamCRDs installed: the
// scope of a built-in kind as kube-apiserver registers it, and of a custom kind as its CRD's
// spec.scope says. TestServedKindsEqualDiscovery checks it against the real API server of the
// tests and rewrites it with -update-served.
//
//go:embed served.json
var servedJSON []byte

// servedKind is one kind of served.json.
type servedKind struct {
	Group      string `json:"group,omitempty"`
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Resource   string `json:"resource"`
	Namespaced bool   `json:"namespaced,omitempty"`
}

// RESTMapper maps the kinds the API server serves (served.json) to their resources and scopes,
// for an offline evaluation that has no cluster to ask.
var RESTMapper = sync.OnceValue(func() meta.RESTMapper {
	m, err := restMapperOf(servedJSON)
	if err != nil {
		panic(err) // served.json is compiled in and tested
	}
	return m
})

func restMapperOf(data []byte) (meta.RESTMapper, error) {
	var kinds []servedKind
	if err := json.Unmarshal(data, &kinds); err != nil {
		return nil, fmt.Errorf("served.json: %w", err)
	}
	var gvs []schema.GroupVersion // for look-ups without a version, in the file's order
	seen := map[schema.GroupVersion]bool{}
	for _, k := range kinds {
		if gv := (schema.GroupVersion{Group: k.Group, Version: k.Version}); !seen[gv] {
			gvs, seen[gv] = append(gvs, gv), true
		}
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for _, k := range kinds {
		scope := meta.RESTScopeRoot
		if k.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		gv := schema.GroupVersion{Group: k.Group, Version: k.Version}
		m.AddSpecific(gv.WithKind(k.Kind), gv.WithResource(k.Resource), gv.WithResource(k.Resource), scope)
	}
	return m, nil
}

// resourceOf returns the resource of gvk and whether it is namespaced, from mapper. A version the
// mapper does not know takes the scope of the kind at a version it knows (a kind's scope does not
// change between versions). A kind the mapper does not know at all is taken as namespaced, as
// kubectl would create it, with its resource guessed from the kind.
func resourceOf(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	if m, err := mapper.RESTMapping(gvk.GroupKind()); err == nil {
		return gvk.GroupVersion().WithResource(m.Resource.Resource), m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvr, true
}
