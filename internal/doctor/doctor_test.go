package doctor

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{}, &cluster))
}

// prodObjects is what prod deploys: its overlay and its Applications.
func prodObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	src, err := render.FromDir("../..")
	require.NoError(t, err)
	res, err := src.Render("prod")
	require.NoError(t, err)
	apps, err := src.RenderApps("prod")
	require.NoError(t, err)
	return append(res.Objects, apps.Objects...)
}

func run(t *testing.T, objs []*unstructured.Unstructured) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cluster.Config, "prod", objs, Options{})
	require.NoError(t, err)
	return rep
}

// failing lists the checks that failed, as "area name".
func failing(rep *Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if !c.OK {
			out = append(out, c.Area+" "+c.Name)
		}
	}
	sort.Strings(out)
	return out
}

func check(t *testing.T, rep *Report, area, name string) Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Area == area && c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s %s in %+v", area, name, rep.Checks)
	return Check{}
}

// apply creates or updates objects server-side as the test's admin.
func apply(t *testing.T, docs string) {
	t.Helper()
	cmd := cluster.Kubectl(context.Background(), "apply", "--server-side", "-f", "-")
	cmd.Stdin = strings.NewReader(docs)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	out, err := cluster.Kubectl(context.Background(), args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// installCRD installs a CRD file of a module the test cluster does not install (the issuers'
// and stores' kinds: the platform renders none of them).
func installCRD(t *testing.T, module, version, file, name string) {
	t.Helper()
	dir, err := testcluster.ModuleDir(context.Background(), module, version)
	require.NoError(t, err)
	kubectl(t, "apply", "--server-side", "-f", filepath.Join(dir, file))
	kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+name)
}

// TestDoctorOnTheTestCluster: on a cluster with the upstream CRDs only, doctor fails naming the
// issuer's and the store's APIs and the GatewayClass; with those there it passes; then each part
// removed is named again, and the auditor's access is checked once its ServiceAccount exists.
func TestDoctorOnTheTestCluster(t *testing.T) {
	testcluster.Need(t)
	objs := prodObjects(t)

	rep := run(t, objs)
	assert.False(t, rep.OK)
	// The model cache's StorageClass is the cluster's: it names a CSI driver of its own.
	assert.Equal(t, []string{"object ClusterIssuer platform", "object ClusterSecretStore platform", "object GatewayClass istio", "object StorageClass model-cache"}, failing(rep))
	issuer := check(t, rep, "object", "ClusterIssuer platform")
	assert.Contains(t, issuer.Detail, "its API (cert-manager.io/v1) is not served")
	assert.Contains(t, issuer.Detail, "named by Certificate llm-inference/llm-gateway-tls")
	assert.Contains(t, issuer.Fix, "install cert-manager")
	assert.Equal(t, "argocd", check(t, rep, "argocd", "Argo CD health checks").Area)
	assert.True(t, check(t, rep, "auditor", "auditor's read access (llm-system/auditor)").Skipped, "not synced yet")
	keda := check(t, rep, "api", "API keda.sh")
	assert.True(t, keda.OK)
	assert.Equal(t, "v1alpha1 ScaledObject", keda.Detail)

	installCRD(t, "github.com/cert-manager/cert-manager", "v1.21.2", "deploy/crds/cert-manager.io_clusterissuers.yaml", "clusterissuers.cert-manager.io")
	installCRD(t, "github.com/external-secrets/external-secrets", "v1.3.2", "config/crds/bases/external-secrets.io_clustersecretstores.yaml", "clustersecretstores.external-secrets.io")
	rep = run(t, objs)
	assert.Contains(t, check(t, rep, "object", "ClusterIssuer platform").Detail, "missing; named by")
	apply(t, `apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: platform}
spec: {selfSigned: {}}
---
apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {name: platform}
spec: {provider: {fake: {data: []}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: istio}
spec: {controllerName: istio.io/gateway-controller}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: model-cache}
provisioner: efs.csi.aws.com
`)
	rep = run(t, objs)
	assert.True(t, rep.OK, "%v", failing(rep))
	assert.Empty(t, failing(rep))

	// The auditor's ServiceAccount without its RBAC: every read is denied.
	ns := []string{"argocd"} // Argo CD's own, where the Applications are
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ns = append(ns, o.GetName())
		}
	}
	for _, n := range ns {
		kubectl(t, "create", "namespace", n)
	}
	kubectl(t, "-n", "llm-system", "create", "serviceaccount", "auditor")
	rep = run(t, objs)
	access := check(t, rep, "auditor", "auditor's read access (llm-system/auditor)")
	assert.False(t, access.OK)
	assert.Contains(t, access.Detail, "denied: ")
	assert.Contains(t, access.Fix, "base/auditor/rbac.yaml")
	// With the RBAC the env renders for it.
	var rbac []string
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if gk.Group == "rbac.authorization.k8s.io" && strings.Contains(o.GetName(), "auditor") {
			data, err := yaml.Marshal(o.Object)
			require.NoError(t, err)
			rbac = append(rbac, string(data))
		}
	}
	require.NotEmpty(t, rbac)
	apply(t, strings.Join(rbac, "---\n"))
	rep = run(t, objs)
	access = check(t, rep, "auditor", "auditor's read access (llm-system/auditor)")
	assert.True(t, access.OK, access.Detail)

	// Each part removed is named.
	kubectl(t, "delete", "gatewayclass", "istio")
	rep = run(t, objs)
	assert.Equal(t, []string{"object GatewayClass istio"}, failing(rep))
	gc := check(t, rep, "object", "GatewayClass istio")
	assert.Contains(t, gc.Detail, "named by Gateway llm-inference/llm-gateway")

	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	require.NoError(t, crds.Delete(context.Background(), "scaledobjects.keda.sh", metav1.DeleteOptions{}))
	kubectl(t, "wait", "--for=delete", "--timeout=60s", "crd/scaledobjects.keda.sh")
	rep = run(t, objs)
	assert.Contains(t, failing(rep), "api API keda.sh")
	keda = check(t, rep, "api", "API keda.sh")
	assert.Equal(t, "not served: v1alpha1 ScaledObject", keda.Detail)
	assert.Contains(t, keda.Fix, "install KEDA")
}
