package testcluster

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

var cluster *Cluster

func TestMain(m *testing.M) {
	if os.Getenv("TESTCLUSTER_PANIC_CHILD") != "" {
		// Child of TestPanicLeavesNothingBehind: only that test runs, without a shared cluster.
		os.Exit(m.Run())
	}
	os.Exit(Main(m, Options{}, &cluster))
}

const gpuDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-qwen
  namespace: NS
spec:
  replicas: 2
  selector:
    matchLabels: {app: vllm-qwen}
  template:
    metadata:
      labels: {app: vllm-qwen}
    spec:
      tolerations:
      - {key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: accelerator, operator: In, values: [l40s]}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        resources:
          limits: {nvidia.com/gpu: "1", cpu: "4", memory: 32Gi}
          requests: {nvidia.com/gpu: "1", cpu: "2", memory: 32Gi}
`

// applyAs server-side applies YAML as the given field manager, as Argo CD's server-side sync does.
func applyAs(t *testing.T, manager string, gvr schema.GroupVersionResource, ns, doc string) (*unstructured.Unstructured, error) {
	t.Helper()
	dc, err := cluster.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(doc, "NS", ns)), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	data, _ := json.Marshal(obj)
	force := true
	return dc.Resource(gvr).Namespace(ns).Patch(context.Background(), u.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: manager, Force: &force})
}

func TestServerSideApplyThenKubectlEditChangesOwner(t *testing.T) {
	Need(t)
	ns := cluster.Namespace(t)
	deploy := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	if _, err := applyAs(t, "argocd-controller", deploy, ns, gpuDeployment); err != nil {
		t.Fatalf("server-side apply: %v", err)
	}
	cmd := cluster.Kubectl(context.Background(), "-n", ns, "edit", "deployment/vllm-qwen")
	cmd.Env = append(cmd.Env, `EDITOR=sed -i s/replicas:\ 2/replicas:\ 5/`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl edit: %v\n%s", err, out)
	}
	dc, _ := cluster.Dynamic()
	got, err := dc.Resource(deploy).Namespace(ns).Get(context.Background(), "vllm-qwen", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 {
		t.Fatalf("spec.replicas = %d after kubectl edit, want 5", r)
	}
	owners := map[string]string{}
	for _, mf := range got.GetManagedFields() {
		fields := string(mf.FieldsV1.Raw)
		if strings.Contains(fields, `"f:replicas"`) {
			owners["spec.replicas"] = mf.Manager + "/" + string(mf.Operation)
		}
		if strings.Contains(fields, `"f:tolerations"`) {
			owners["tolerations"] = mf.Manager + "/" + string(mf.Operation)
		}
	}
	want := map[string]string{"spec.replicas": "kubectl-edit/Update", "tolerations": "argocd-controller/Apply"}
	for k, v := range want {
		if owners[k] != v {
			t.Errorf("%s owned by %q, want %q (all owners: %v)", k, owners[k], v, owners)
		}
	}
}

func TestUpstreamCRDsValidateSchemas(t *testing.T) {
	Need(t)
	ns := cluster.Namespace(t)
	app := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	so := schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	pool := schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}
	objective := schema.GroupVersionResource{Group: "inference.networking.x-k8s.io", Version: "v1alpha2", Resource: "inferenceobjectives"}
	cases := []struct {
		name    string
		gvr     schema.GroupVersionResource
		doc     string
		wantErr string
	}{
		{"valid application", app, `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: llm-prod, namespace: NS}
spec:
  project: default
  source: {repoURL: "https://git.example.com/platform.git", path: overlays/prod, targetRevision: main}
  destination: {server: "https://kubernetes.default.svc"}
`, ""},
		{"application without destination", app, `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: broken, namespace: NS}
spec:
  project: default
  source: {repoURL: "https://git.example.com/platform.git", path: overlays/prod}
`, "destination"},
		{"valid scaledobject", so, `
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: vllm-qwen, namespace: NS}
spec:
  scaleTargetRef: {name: vllm-qwen}
  minReplicaCount: 1
  triggers:
  - type: prometheus
    metadata: {serverAddress: "http://prometheus:9090", query: "sum(vllm:num_requests_waiting)", threshold: "10"}
`, ""},
		{"scaledobject with a string replica count", so, `
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: broken, namespace: NS}
spec:
  scaleTargetRef: {name: vllm-qwen}
  minReplicaCount: "one"
  triggers:
  - type: prometheus
    metadata: {query: "x"}
`, "minReplicaCount"},
		{"scaledobject without triggers", so, `
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: broken2, namespace: NS}
spec:
  scaleTargetRef: {name: vllm-qwen}
`, "triggers"},
		{"valid inferencepool", pool, `
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: qwen, namespace: NS}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: vllm-qwen}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {kind: Service, name: epp-qwen, port: {number: 9002}, failureMode: FailClose}
`, ""},
		{"inferencepool without target ports", pool, `
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: broken, namespace: NS}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: vllm-qwen}}
`, "targetPorts"},
		{"inferencepool whose picker Service has no port", pool, `
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: broken2, namespace: NS}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: vllm-qwen}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {name: epp-qwen}
`, "port is required"},
		{"valid inferenceobjective", objective, `
apiVersion: inference.networking.x-k8s.io/v1alpha2
kind: InferenceObjective
metadata: {name: qwen-batch, namespace: NS}
spec: {poolRef: {name: qwen}, priority: -10}
`, ""},
		{"inferenceobjective without its pool", objective, `
apiVersion: inference.networking.x-k8s.io/v1alpha2
kind: InferenceObjective
metadata: {name: orphan, namespace: NS}
spec: {priority: 10}
`, "poolRef"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := applyAs(t, "argocd-controller", tc.gvr, ns, tc.doc)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("valid object rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("invalid object accepted; want an error about %s", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not mention %s", err, tc.wantErr)
			}
		})
	}
}

func TestKubectlSeesUpstreamKinds(t *testing.T) {
	Need(t)
	out, err := cluster.Kubectl(context.Background(), "api-resources", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl api-resources: %v\n%s", err, out)
	}
	for _, want := range []string{"applications.argoproj.io", "scaledobjects.keda.sh", "nodepools.karpenter.sh",
		"httproutes.gateway.networking.k8s.io", "servicemonitors.monitoring.coreos.com", "clusters.postgresql.cnpg.io"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl api-resources lacks %s", want)
		}
	}
	ver, err := cluster.Kubectl(context.Background(), "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("kubectl version: %v", err)
	}
	if !strings.Contains(string(ver), `"gitVersion": "`+KubernetesVersion+`"`) {
		t.Errorf("server version is not %s: %s", KubernetesVersion, ver)
	}
}

// TestPanicLeavesNothingBehind runs a child test binary that starts a cluster and panics, then checks
// that the cluster's processes and its temporary directory are gone.
func TestPanicLeavesNothingBehind(t *testing.T) {
	Need(t)
	if os.Getenv("TESTCLUSTER_PANIC_CHILD") != "" {
		c, err := Start(context.Background(), Options{SkipCRDs: true})
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("CLUSTERDIR=" + c.Dir + "\n")
		os.Stdout.Sync()
		panic("test panics with a running cluster")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPanicLeavesNothingBehind$")
	cmd.Env = append(os.Environ(), "TESTCLUSTER_PANIC_CHILD=1")
	out, _ := cmd.CombinedOutput()
	var dir string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "CLUSTERDIR="); ok {
			dir = v
		}
	}
	if dir == "" {
		t.Fatalf("child did not start a cluster:\n%s", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(dir); os.IsNotExist(err) && !processesUnder(dir) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("after the panic, %s still exists or its processes still run", dir)
}

// processesUnder reports whether any process has dir on its command line.
func processesUnder(dir string) bool {
	out, _ := exec.Command("pgrep", "-f", dir).Output()
	return strings.TrimSpace(string(out)) != ""
}
