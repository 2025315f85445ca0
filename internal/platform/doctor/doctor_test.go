package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{}, &cluster))
}

// prodObjects is what prod deploys: its overlay and its Applications.
func prodObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	src, err := render.FromDir("../../..")
	require.NoError(t, err)
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	require.NoError(t, err)
	apps, err := render.Apps(context.Background(), render.Engine{}, src, "prod")
	require.NoError(t, err)
	return append(res.Objects, apps.Objects...)
}

func run(t *testing.T, objs []*unstructured.Unstructured) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cluster.Config, "prod", objs, Options{})
	require.NoError(t, err)
	return rep
}

// runUntil runs doctor until cond holds of its report (the API server's discovery follows a new
// or deleted CRD a moment after it is established or gone), and returns that report.
func runUntil(t *testing.T, objs []*unstructured.Unstructured, what string, cond func(*Report) bool) *Report {
	t.Helper()
	var rep *Report
	require.Eventually(t, func() bool {
		rep = run(t, objs)
		return cond(rep)
	}, time.Minute, 100*time.Millisecond, what)
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
	cmd := cluster.Kubectl(context.Background(), "apply", "--server-side", "--force-conflicts", "-f", "-")
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
	// Not kubectl wait: it fails ("accessor error") when it reads the CRD before the API server
	// has written any condition.
	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	require.Eventually(t, func() bool {
		crd, err := crds.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		established, _ := conditionTrue(crd, "Established")
		return established
	}, time.Minute, 50*time.Millisecond, "CRD %s established", name)
}

// setCondition writes a status condition as the cluster's admin: what the object's controller
// would report, for doctor to read (no controller runs in the test cluster).
func setCondition(t *testing.T, resource, name, condition, status string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"reason":"Test","message":"set by the test","lastTransitionTime":"2026-12-03T00:00:00Z"}]}}`, condition, status)
	kubectl(t, "patch", resource, name, "--subresource=status", "--type=merge", "-p", patch)
}

// TestDoctorOnTheTestCluster: on a cluster with the upstream CRDs only, doctor fails naming the
// issuer's and the store's APIs, the GatewayClass and the StorageClasses; with those there it
// still fails until each works (its status condition); then it passes. Argo CD's health checks
// are read from argocd-cm; the auditor's access is checked once its ServiceAccount exists; and
// each part removed is named again.
func TestDoctorOnTheTestCluster(t *testing.T) {
	testcluster.Need(t)
	objs := prodObjects(t)

	rep := run(t, objs)
	assert.False(t, rep.OK)
	assert.Zero(t, rep.Errors)
	// The model cache's StorageClass is the cluster's: it names a CSI driver of its own. Qdrant's,
	// the auditor's and pgvector's claims take the default class.
	assert.Equal(t, []string{"object ClusterIssuer platform", "object ClusterSecretStore platform", "object GatewayClass istio",
		"object StorageClass model-cache", "object a Prometheus selecting the monitors and rules", "object default StorageClass"}, failing(rep))
	issuer := check(t, rep, "object", "ClusterIssuer platform")
	assert.Contains(t, issuer.Detail, "its API (cert-manager.io/v1) is not served")
	assert.Contains(t, issuer.Detail, "named by Certificate llm-inference/llm-gateway-tls")
	assert.Contains(t, issuer.Fix, "install cert-manager")
	assert.Contains(t, check(t, rep, "object", "default StorageClass").Detail, "StatefulSet llm-rag/qdrant")
	assert.True(t, check(t, rep, "argocd", "Argo CD health checks").Skipped, "no Argo CD yet")
	assert.True(t, check(t, rep, "auditor", "auditor's access (llm-system/auditor)").Skipped, "not synced yet")
	keda := check(t, rep, "api", "API keda.sh")
	assert.True(t, keda.OK)
	assert.Equal(t, "v1alpha1 ScaledObject", keda.Detail)

	installCRD(t, "github.com/cert-manager/cert-manager", "v1.21.2", "deploy/crds/cert-manager.io_clusterissuers.yaml", "clusterissuers.cert-manager.io")
	installCRD(t, "github.com/external-secrets/external-secrets", "v1.3.2", "config/crds/bases/external-secrets.io_clustersecretstores.yaml", "clustersecretstores.external-secrets.io")
	installCRD(t, "github.com/prometheus-operator/prometheus-operator", "v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_prometheuses.yaml", "prometheuses.monitoring.coreos.com")
	rep = runUntil(t, objs, "discovery serves the new CRDs", func(r *Report) bool {
		return !strings.Contains(check(t, r, "object", "ClusterIssuer platform").Detail, "is not served") &&
			!strings.Contains(check(t, r, "object", "a Prometheus selecting the monitors and rules").Detail, "is not served")
	})
	assert.Regexp(t, `^(\d+) of (\d+) selected by no Prometheus \(of 0\): `, check(t, rep, "object", "a Prometheus selecting the monitors and rules").Detail)
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
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: ebs.csi.aws.com
---
apiVersion: v1
kind: Namespace
metadata: {name: monitoring}
---
# kube-prometheus-stack's Prometheus in its own namespace, with the release selectors but no
# namespace selectors: it then looks in its own namespace only.
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: kube-prometheus-stack-prometheus, namespace: monitoring}
spec:
  serviceMonitorSelector: {matchLabels: {release: kube-prometheus-stack}}
  podMonitorSelector: {matchLabels: {release: kube-prometheus-stack}}
  ruleSelector: {matchLabels: {release: kube-prometheus-stack}}
`)
	rep = run(t, objs)
	assert.Equal(t, []string{"object ClusterIssuer platform", "object ClusterSecretStore platform", "object GatewayClass istio",
		"object a Prometheus selecting the monitors and rules"}, failing(rep), "they exist, but no controller said they work")
	assert.Contains(t, check(t, rep, "object", "a Prometheus selecting the monitors and rules").Detail, "ServiceMonitor llm-monitoring/vllm")
	kubectl(t, "-n", "monitoring", "patch", "prometheus", "kube-prometheus-stack-prometheus", "--type=merge", "-p",
		`{"spec":{"serviceMonitorNamespaceSelector":{},"podMonitorNamespaceSelector":{},"ruleNamespaceSelector":{}}}`)
	assert.Contains(t, check(t, rep, "object", "GatewayClass istio").Detail, "exists but is not Accepted (Unknown: Pending Waiting for controller)")
	setCondition(t, "clusterissuer", "platform", "Ready", "True")
	setCondition(t, "clustersecretstore", "platform", "Ready", "False")
	setCondition(t, "gatewayclass", "istio", "Accepted", "True")
	rep = run(t, objs)
	assert.Equal(t, []string{"object ClusterSecretStore platform"}, failing(rep))
	assert.Contains(t, check(t, rep, "object", "ClusterSecretStore platform").Detail, "exists but is not Ready (False: Test set by the test)")
	setCondition(t, "clustersecretstore", "platform", "Ready", "True")
	rep = run(t, objs)
	assert.True(t, rep.OK, "%v", failing(rep))
	assert.Equal(t, "controller istio.io/gateway-controller: Istio (with ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true)",
		check(t, rep, "object", "GatewayClass istio routes to InferencePools").Detail)
	assert.Equal(t, "v1 InferencePool", check(t, rep, "api", "API inference.networking.k8s.io").Detail)
	assert.Equal(t, "gp3 for the claims of StatefulSet llm-rag/qdrant, Cluster llm-rag/pgvector, StatefulSet llm-system/auditor",
		check(t, rep, "object", "default StorageClass").Detail)

	// Argo CD: an Application without a health check fails (the app-of-apps' waves would not
	// wait); a per-key check and one in the resource.customizations block are both read.
	var ns []string
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ns = append(ns, o.GetName())
		}
	}
	for _, n := range append(ns, "argocd") {
		kubectl(t, "create", "namespace", n)
	}
	kubectl(t, "-n", "argocd", "create", "configmap", "argocd-cm")
	rep = run(t, objs)
	app := check(t, rep, "argocd", "health of Application.argoproj.io")
	assert.False(t, app.OK)
	assert.Contains(t, app.Fix, "resource.customizations.health.argoproj.io_Application")
	assert.Equal(t, "Argo CD's built-in check (of the release the auditor is built with)", check(t, rep, "argocd", "health of ScaledObject.keda.sh").Detail)
	apply(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: argocd}
data:
  resource.customizations.health.argoproj.io_Application: |
    hs = {status = "Progressing"}
    if obj.status ~= nil and obj.status.health ~= nil then hs.status = obj.status.health.status end
    return hs
  resource.customizations: |
    postgresql.cnpg.io/*:
      health.lua: |
        return {status = "Healthy"}
`)
	rep = run(t, objs)
	assert.Equal(t, "customized in argocd-cm (resource.customizations.health.argoproj.io_Application)", check(t, rep, "argocd", "health of Application.argoproj.io").Detail)
	assert.Equal(t, "customized in argocd-cm (resource.customizations: postgresql.cnpg.io/*)", check(t, rep, "argocd", "health of Cluster.postgresql.cnpg.io").Detail)
	assert.True(t, rep.OK, "%v", failing(rep))

	// The auditor's ServiceAccount without its RBAC: every read is denied.
	kubectl(t, "-n", "llm-system", "create", "serviceaccount", "auditor")
	rep = run(t, objs)
	access := check(t, rep, "auditor", "auditor's access (llm-system/auditor)")
	assert.False(t, access.OK)
	assert.Regexp(t, `^denied (\d+) of \d+: `, access.Detail)
	assert.Contains(t, access.Fix, "charts/auditor")
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
	access = check(t, rep, "auditor", "auditor's access (llm-system/auditor)")
	assert.True(t, access.OK, access.Detail)
	// Secrets are read for hand-made objects (drift.DefaultExtraKinds), not because the render has
	// any in every namespace: without them in its ClusterRole, doctor names the reads.
	kubectl(t, "patch", "clusterrole", "llm-auditor-read-namespaced", "--type=json", "-p",
		`[{"op":"replace","path":"/rules/0/resources","value":["services","configmaps","serviceaccounts","persistentvolumeclaims","resourcequotas","limitranges"]}]`)
	rep = run(t, objs)
	access = check(t, rep, "auditor", "auditor's access (llm-system/auditor)")
	assert.False(t, access.OK)
	assert.Regexp(t, `^denied \d+ of \d+: list secrets in llm-`, access.Detail)
	apply(t, strings.Join(rbac, "---\n"))

	// Each part removed is named.
	kubectl(t, "delete", "clusterissuer", "platform")
	kubectl(t, "annotate", "storageclass", "gp3", "storageclass.kubernetes.io/is-default-class-")
	rep = run(t, objs)
	assert.Equal(t, []string{"object ClusterIssuer platform", "object default StorageClass"}, failing(rep))
	assert.Contains(t, check(t, rep, "object", "ClusterIssuer platform").Detail, "missing; named by Certificate llm-inference/llm-gateway-tls")

	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	require.NoError(t, crds.Delete(context.Background(), "scaledobjects.keda.sh", metav1.DeleteOptions{}))
	rep = runUntil(t, objs, "discovery drops ScaledObject", func(r *Report) bool { return slices.Contains(failing(r), "api API keda.sh") })
	keda = check(t, rep, "api", "API keda.sh")
	assert.Equal(t, "not served: v1alpha1 ScaledObject", keda.Detail)
	assert.Contains(t, keda.Fix, "install KEDA")
}
