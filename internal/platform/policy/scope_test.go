package policy

import (
	"encoding/json"
	"flag"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var updateServed = flag.Bool("update-served", false, "rewrite served.json from the test API server's discovery")

// TestServedKindsEqualDiscovery: served.json is what the real API server (the pinned version,
// with the upstream CRDs installed) serves.
func TestServedKindsEqualDiscovery(t *testing.T) {
	testcluster.Need(t)
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	require.NoError(t, err)
	groups, err := restmapper.GetAPIGroupResources(dc)
	require.NoError(t, err)
	var got []servedKind
	for _, g := range groups {
		for version, resources := range g.VersionedResources {
			for _, r := range resources {
				if strings.Contains(r.Name, "/") {
					continue // a subresource
				}
				got = append(got, servedKind{Group: g.Group.Name, Version: version, Kind: r.Kind, Resource: r.Name, Namespaced: r.Namespaced})
			}
		}
	}
	sort.Slice(got, func(i, j int) bool {
		a, b := got[i], got[j]
		return a.Group+"/"+a.Version+"/"+a.Kind+"/"+a.Resource < b.Group+"/"+b.Version+"/"+b.Kind+"/"+b.Resource
	})
	if *updateServed {
		lines := make([]string, len(got))
		for i, k := range got {
			b, err := json.Marshal(k)
			require.NoError(t, err)
			lines[i] = "  " + string(b)
		}
		require.NoError(t, os.WriteFile("served.json", []byte("[\n"+strings.Join(lines, ",\n")+"\n]\n"), 0o644))
	}
	data, err := os.ReadFile("served.json")
	require.NoError(t, err)
	var want []servedKind
	require.NoError(t, json.Unmarshal(data, &want))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("served.json differs from the API server's discovery (-served.json +discovery); rerun with -update-served:\n%s", diff)
	}
}

func TestResourceOf(t *testing.T) {
	cases := []struct {
		gvk        schema.GroupVersionKind
		resource   string
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", true},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass"}, "ingressclasses", false},
		{schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, "nodepools", false},
		{schema.GroupVersionKind{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"}, "ec2nodeclasses", false},
		{schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GatewayClass"}, "gatewayclasses", false},
		{schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}, "scaledobjects", true},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1beta1", Kind: "ClusterRole"}, "clusterroles", false}, // an unserved version keeps the kind's scope
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "widgets", true},                               // unknown: namespaced
	}
	for _, c := range cases {
		gvr, namespaced := resourceOf(RESTMapper(), c.gvk)
		assert.Equal(t, c.resource, gvr.Resource, c.gvk.String())
		assert.Equal(t, c.namespaced, namespaced, c.gvk.String())
	}
	m, err := RESTMapper().RESTMapping(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"})
	require.NoError(t, err)
	assert.Equal(t, meta.RESTScopeNameRoot, m.Scope.Name())
}
