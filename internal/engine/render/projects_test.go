package render

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

const inCluster = "https://kubernetes.default.svc"

// TestEnvProjectsAllowExactlyWhatTheEnvRenders (issue #15, safety): each env's Application syncs
// in its own AppProject, whose destinations are the in-cluster server and exactly the namespaces
// the overlay renders, and whose cluster-scoped whitelist is exactly the cluster-scoped kinds it
// renders (scope from the API server, upstream CRDs installed): a kind or namespace added to an
// overlay without its project fails here, not in a real sync. No cascade finalizer: deleting the
// Application orphans the platform's data instead of deleting it.
func TestEnvProjectsAllowExactlyWhatTheEnvRenders(t *testing.T) {
	testcluster.Need(t)
	mapper := restMapper(t)
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			objs := renderApps(t, env)
			app := application(t, objs, "llm-"+env)
			proj := appProject(t, objs, "llm-"+env)
			assert.Equal(t, "llm-"+env, str(app, "spec", "project"))
			assert.Empty(t, app.GetFinalizers(), "llm-%s: no cascade finalizer", env)
			assert.Contains(t, strs(proj, "spec", "sourceRepos"), str(app, "spec", "source", "repoURL"))

			namespaces, clusterKinds := scopes(t, mapper, renderRepo(t, env).Objects)
			servers, dests := destinations(proj)
			assert.Equal(t, []string{inCluster}, servers)
			assert.Equal(t, namespaces, dests, "destinations = the namespaces overlays/%s renders", env)
			assert.Contains(t, dests, str(app, "spec", "destination", "namespace"), "the Application's own destination is allowed")
			assert.Equal(t, clusterKinds, whitelist(proj), "clusterResourceWhitelist = the cluster-scoped kinds overlays/%s renders", env)
			warn, _, _ := unstructured.NestedBool(proj.Object, "spec", "orphanedResources", "warn")
			assert.True(t, warn, "orphaned resources warn")
			assert.Less(t, wave(proj), wave(app), "the project before its Application")
		})
	}
}

// TestPoliciesDeliveredByArgoCD: policies/ is synced by Application llm-policies in every env's
// cluster, in the earliest wave of the app-of-apps, with a project allowing exactly what
// policies/ renders (plus the Namespace its CreateNamespace makes); every Application of apps/
// names a project the same render brings, after it.
func TestPoliciesDeliveredByArgoCD(t *testing.T) {
	testcluster.Need(t)
	mapper := restMapper(t)
	src, err := FromDir("../../..")
	require.NoError(t, err)
	pol, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget("policies")})
	require.NoError(t, err)
	namespaces, clusterKinds := scopes(t, mapper, pol.Objects)
	clusterKinds = append(clusterKinds, "/Namespace")
	slices.Sort(clusterKinds)
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			objs := renderApps(t, env)
			app := application(t, objs, "llm-policies")
			assert.Equal(t, "policies", str(app, "spec", "source", "path"))
			assert.Contains(t, strs(app, "spec", "syncPolicy", "syncOptions"), "CreateNamespace=true")
			proj := appProject(t, objs, str(app, "spec", "project"))
			_, dests := destinations(proj)
			assert.Equal(t, namespaces, dests)
			assert.Equal(t, clusterKinds, whitelist(proj))
			for _, o := range objs {
				if o.GetKind() != "Application" {
					continue
				}
				p := appProject(t, objs, str(o, "spec", "project"))
				assert.Less(t, wave(p), wave(o), "%s: its project %s first", o.GetName(), p.GetName())
				if o.GetName() != "llm-policies" {
					assert.Less(t, wave(app), wave(o), "llm-policies before %s", o.GetName())
				}
			}
		})
	}
}

func appProject(t *testing.T, objs []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "AppProject" && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no AppProject %s", name)
	return nil
}

func restMapper(t *testing.T) meta.RESTMapper {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	require.NoError(t, err)
	groups, err := restmapper.GetAPIGroupResources(dc)
	require.NoError(t, err)
	return restmapper.NewDiscoveryRESTMapper(groups)
}

// scopes returns the sorted namespaces of objs' namespaced objects and the sorted "group/Kind"s
// of their cluster-scoped ones, scope as the API server says.
func scopes(t *testing.T, mapper meta.RESTMapper, objs []*unstructured.Unstructured) (namespaces, clusterKinds []string) {
	t.Helper()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "scope of %s", gvk)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			require.NotEmpty(t, o.GetNamespace(), "%s %s names its namespace", gvk.Kind, o.GetName())
			namespaces = append(namespaces, o.GetNamespace())
		} else {
			clusterKinds = append(clusterKinds, gk(gvk.GroupKind()))
		}
	}
	slices.Sort(namespaces)
	slices.Sort(clusterKinds)
	return slices.Compact(namespaces), slices.Compact(clusterKinds)
}

func gk(g schema.GroupKind) string { return g.Group + "/" + g.Kind }

func destinations(proj *unstructured.Unstructured) (servers, namespaces []string) {
	ds, _, _ := unstructured.NestedSlice(proj.Object, "spec", "destinations")
	for _, d := range ds {
		m := d.(map[string]any)
		servers = append(servers, m["server"].(string))
		namespaces = append(namespaces, m["namespace"].(string))
	}
	slices.Sort(servers)
	slices.Sort(namespaces)
	return slices.Compact(servers), namespaces
}

func whitelist(proj *unstructured.Unstructured) []string {
	ws, _, _ := unstructured.NestedSlice(proj.Object, "spec", "clusterResourceWhitelist")
	var out []string
	for _, w := range ws {
		m := w.(map[string]any)
		out = append(out, gk(schema.GroupKind{Group: m["group"].(string), Kind: m["kind"].(string)}))
	}
	slices.Sort(out)
	return out
}

func str(o *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, fields...)
	return s
}

func strs(o *unstructured.Unstructured, fields ...string) []string {
	s, _, _ := unstructured.NestedStringSlice(o.Object, fields...)
	return s
}

// rootApplication reads clusters/<env>/root.yaml, the app-of-apps applied by hand.
func rootApplication(t *testing.T, env string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("../../../clusters/" + env + "/root.yaml")
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON(data)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(js))
	return u
}
