package audit

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// change is one reported field in a form a test can compare whole.
type change struct {
	Object, Path, Change string
	Desired, Live        any
	Manager              string
}

// changes lists the report's fields of the given objects (Kind/name).
func changes(rep *drift.Report, objs ...string) []change {
	want := map[string]bool{}
	for _, o := range objs {
		want[o] = true
	}
	var out []change
	for _, o := range rep.Objects {
		if !want[o.Kind+"/"+o.Name] {
			continue
		}
		for _, fl := range o.Fields {
			out = append(out, change{o.Kind + "/" + o.Name, fl.Path, fl.Change, fl.Desired, fl.Live, fl.Manager})
		}
	}
	return out
}

// TestHandEditsKubectlDiffSees is the four hand edits, each one a real difference from Git
// that `kubectl diff --server-side` shows: a Git-declared env var removed, the GPU taken from a
// vLLM pod, an image changed under the applier's own name, a declared annotation "1" → "1.0".
func TestHandEditsKubectlDiffSees(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	inference, api := f.NS("inference"), f.NS("api")
	f.Kubectl("-n", inference, "set", "env", "deploy/vllm-qwen", "-c", "vllm", "HF_HUB_OFFLINE-")
	f.Kubectl("-n", inference, "patch", "deploy/vllm-llama", "--type=json", `-p=[`+
		`{"op":"remove","path":"/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu"},`+
		`{"op":"remove","path":"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"}]`)
	f.Kubectl("-n", api, "patch", "deploy/rag-api", "--field-manager=argocd-controller",
		`-p={"spec":{"template":{"spec":{"containers":[{"name":"api","image":"registry.example.com/llm/rag-api:6.6.6"}]}}}}`)
	f.Kubectl("-n", inference, "annotate", "--overwrite", "deploy/vllm-llama", "argocd.argoproj.io/sync-wave=1.0")

	rep := f.audit()
	want := []change{
		{"Deployment/rag-api", ".spec.template.spec.containers[name=api].image", drift.Changed,
			"registry.example.com/llm/rag-api:1.4.2", "registry.example.com/llm/rag-api:6.6.6", "argocd-controller"},
		{"Deployment/vllm-llama", `.metadata.annotations["argocd.argoproj.io/sync-wave"]`, drift.Changed, "1", "1.0", "kubectl-annotate"},
		// A removed field has no owner left in managedFields; without a watch (the CLI) nobody is named.
		{"Deployment/vllm-llama", `.spec.template.spec.containers[name=vllm].resources.limits["nvidia.com/gpu"]`, drift.Removed, "1", nil, ""},
		{"Deployment/vllm-llama", `.spec.template.spec.containers[name=vllm].resources.requests["nvidia.com/gpu"]`, drift.Removed, "1", nil, ""},
		{"Deployment/vllm-qwen", ".spec.template.spec.containers[name=vllm].env[name=HF_HUB_OFFLINE]", drift.Removed,
			map[string]any{"name": "HF_HUB_OFFLINE", "value": "1"}, nil, ""},
	}
	assert.Equal(t, want, changes(rep, "Deployment/rag-api", "Deployment/vllm-llama", "Deployment/vllm-qwen"), "report:\n%s", dump(rep))
	assert.Len(t, rep.Objects, 3, "only the three edited Deployments drift:\n%s", dump(rep))
	for _, o := range rep.Objects {
		assert.Equal(t, drift.Modified, o.Status, "%s/%s", o.Kind, o.Name)
	}
	assert.Empty(t, oracleMismatch(rep, kubectlDiff(t, f)), "field paths differ from kubectl diff --server-side")

	// The CLI says the same and exits 1.
	out, code := runAuditorStdout(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "-o", "json")
	require.Equal(t, 1, code, out)
	var cli drift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &cli), out)
	assert.Equal(t, want, changes(&cli, "Deployment/rag-api", "Deployment/vllm-llama", "Deployment/vllm-qwen"))
	assert.False(t, cli.InSync)
}

// TestDuplicateListKeys edits one of two list items that share a name-like value: Service ports
// 53/TCP and 53/UDP (keyed by port and protocol), HTTPRoute parentRefs that differ only by
// sectionName and backendRefs to one Service on two ports (atomic lists: items are positions).
func TestDuplicateListKeys(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	api := f.NS("api")
	require.NoError(t, f.Write("overlays/prod/resolver.yaml", `apiVersion: v1
kind: Service
metadata:
  name: resolver
  namespace: `+api+`
spec:
  selector:
    app: resolver
  ports:
    - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 5353}
    - {name: dns-udp, port: 53, protocol: UDP, targetPort: 5353}
    - {name: doh, port: 8053, protocol: TCP, targetPort: 8053}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: resolver
  namespace: `+api+`
spec:
  parentRefs:
    - {group: gateway.networking.k8s.io, kind: Gateway, name: `+f.Prefix+`-llm-gateway, namespace: `+f.NS("inference")+`, sectionName: http}
    - {group: gateway.networking.k8s.io, kind: Gateway, name: `+f.Prefix+`-llm-gateway, namespace: `+f.NS("inference")+`, sectionName: https}
  rules:
    - backendRefs:
        - {name: resolver, port: 53, weight: 90}
        - {name: resolver, port: 8053, weight: 10}
`))
	f.Edit("overlays/prod/kustomization.yaml", "  - canary\n", "  - canary\n  - resolver.yaml\n")
	f.Sync(f.Commit("a resolver with duplicate-looking list items"))
	require.True(t, f.audit().InSync, "fresh sync of the resolver")

	f.Kubectl("-n", api, "patch", "service/resolver", "--type=json", `-p=[{"op":"replace","path":"/spec/ports/1/targetPort","value":5454}]`)
	f.Kubectl("-n", api, "patch", "httproute/resolver", "--type=json", `-p=[`+
		`{"op":"replace","path":"/spec/parentRefs/1/sectionName","value":"admin"},`+
		`{"op":"replace","path":"/spec/rules/0/backendRefs/1/weight","value":50}]`)
	rep := f.audit()
	want := []change{
		{"HTTPRoute/resolver", ".spec.parentRefs[1].sectionName", drift.Changed, "https", "admin", "kubectl-patch"},
		{"HTTPRoute/resolver", ".spec.rules[0].backendRefs[1].weight", drift.Changed, int64(10), int64(50), "kubectl-patch"},
		{"Service/resolver", ".spec.ports[port=53,protocol=UDP].targetPort", drift.Changed, int64(5353), int64(5454), "kubectl-patch"},
	}
	assert.Equal(t, want, changes(rep, "HTTPRoute/resolver", "Service/resolver"), "report:\n%s", dump(rep))
	assert.Empty(t, oracleMismatch(rep, kubectlDiff(t, f)), "field paths differ from kubectl diff --server-side")
}

// TestNoFalseDriftInAnyOverlay syncs dev, staging and prod server-side, waits until
// kube-controller-manager has defaulted, rolled out and autoscaled everything, and expects the
// auditor and kubectl diff both to find nothing.
func TestNoFalseDriftInAnyOverlay(t *testing.T) {
	testcluster.Need(t)
	for _, env := range []string{"dev", "staging", "prod"} {
		t.Run(env, func(t *testing.T) {
			f := &fixture{Platform: testfixture.NewEnv(t, cluster, "../../..", env), t: t}
			settle(t, f)
			rep := f.audit()
			assert.True(t, rep.InSync, "false drift after a sync of %s:\n%s", env, dump(rep))
			assert.Empty(t, kubectlDiff(t, f), "kubectl diff after a sync of %s", env)
		})
	}
}

// settle waits until the controller-manager has acted on every workload of the fixture: each
// Deployment and StatefulSet has observed its generation, and each HPA has scaled its target to
// at least its minimum.
func settle(t *testing.T, f *fixture) {
	t.Helper()
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	res := f.Rendered(f.Head)
	require.Eventually(t, func() bool {
		for _, o := range res.Objects {
			ns, name := o.GetNamespace(), o.GetName()
			switch o.GetKind() {
			case "Deployment":
				d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || d.Status.ObservedGeneration < d.Generation || !progressed(d) {
					return false
				}
			case "StatefulSet":
				s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || s.Status.ObservedGeneration < s.Generation {
					return false
				}
			case "HorizontalPodAutoscaler":
				h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || h.Spec.MinReplicas == nil {
					return false
				}
				d, err := cs.AppsV1().Deployments(ns).Get(ctx, h.Spec.ScaleTargetRef.Name, metav1.GetOptions{})
				if err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas < *h.Spec.MinReplicas {
					return false
				}
			}
		}
		return true
	}, 2*time.Minute, 250*time.Millisecond, "the controller-manager did not settle %s", f.Env)
}

// progressed says the Deployment controller has created the ReplicaSet of the current template
// (it writes the Progressing condition with the new ReplicaSet's name).
func progressed(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return true
		}
	}
	return false
}

// TestAutoscalerIsNotDriftKubectlScaleIs: Git declares replicas: 1 and an HPA (min 2, max 3)
// scales the Deployment. The real HPA, run by kube-controller-manager through the scale
// subresource, is a controller named for that field of an object it targets: not drift to the
// auditor's comparison. A person's `kubectl scale` on the same field afterwards is.
func TestAutoscalerIsNotDriftKubectlScaleIs(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	api := f.NS("api")
	require.NoError(t, f.Write("overlays/prod/scaled.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: scaled
  namespace: `+api+`
spec:
  replicas: 1
  selector:
    matchLabels: {app: scaled}
  template:
    metadata:
      labels: {app: scaled}
    spec:
      containers:
        - name: app
          image: registry.example.com/llm/rag-api:1.4.2
          resources: {requests: {cpu: 100m}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: scaled
  namespace: `+api+`
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: scaled}
  minReplicas: 2
  maxReplicas: 3
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
`))
	f.Edit("overlays/prod/kustomization.yaml", "  - canary\n", "  - canary\n  - scaled.yaml\n")
	f.Sync(f.Commit("a Deployment Git sizes and an HPA scales"))
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	replicas := func() int32 {
		d, err := cs.AppsV1().Deployments(api).Get(context.Background(), "scaled", metav1.GetOptions{})
		require.NoError(t, err)
		return *d.Spec.Replicas
	}
	require.Eventually(t, func() bool { return replicas() == 2 }, time.Minute, 200*time.Millisecond, "the HPA did not raise replicas to its minimum")
	// The auditor's own comparison excuses the HPA. Argo CD's does not — an Application that
	// declares replicas under an HPA without ignoreDifferences shows OutOfSync, and selfHeal
	// would fight the HPA — so the object is reported as Argo CD's alone, with the field.
	rep := f.audit()
	o := object(t, rep, "Deployment", "scaled")
	require.NotNil(t, o.ArgoCD)
	assert.True(t, o.ArgoCD.OutOfSync)
	assert.Contains(t, o.Note, "Argo CD reports OutOfSync where the auditor's comparison found no difference")
	assert.Equal(t, []change{{"Deployment/scaled", ".spec.replicas", drift.Changed, int64(1), int64(2), "kube-controller-manager"}},
		changes(rep, "Deployment/scaled"))

	f.Kubectl("-n", api, "scale", "deployment/scaled", "--replicas=3") // within the HPA's range: it keeps it
	rep = f.audit()
	o = object(t, rep, "Deployment", "scaled")
	assert.Empty(t, o.Note, "the auditor's own comparison flags it now")
	fl := field(t, rep, o, ".spec.replicas")
	assert.Equal(t, []any{"kubectl", "scale", int64(1), int64(3)}, []any{fl.Manager, fl.Subresource, fl.Desired, fl.Live})
}
