package drift

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	data, _ := yaml.YAMLToJSON([]byte(doc))
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u.Object
}

func TestScalarEqual(t *testing.T) {
	cases := []struct {
		a, b any
		want bool
	}{
		{"1000m", "1", true},
		{"1Gi", "1024Mi", true},
		{"500m", "0.5", true},
		{int64(8080), "8080", true},
		{int64(2), int64(3), false},
		{"1Gi", "1G", false},
		{true, "true", true},
		{"", "0", false},
		{"abc", "abd", false},
		{nil, "x", false},
	}
	for _, tc := range cases {
		if got := scalarEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("scalarEqual(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCompareObject(t *testing.T) {
	desired := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: n, labels: {app: d}}
spec:
  replicas: 2
  template:
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]
      containers:
      - name: vllm
        image: vllm:1
        args: [--a, --b]
        ports: [{containerPort: 8000, name: http}]
        resources: {limits: {cpu: "1", memory: 1Gi}}
        env: [{name: A, value: "1"}]
`
	cases := []struct {
		name string
		live string
		want []string // path change
	}{
		{"defaults and spellings are not drift", `
metadata: {name: d, namespace: n, labels: {app: d}, uid: x}
spec:
  replicas: 2
  progressDeadlineSeconds: 600
  template:
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]
      containers:
      - name: vllm
        image: vllm:1
        imagePullPolicy: IfNotPresent
        args: [--a, --b]
        ports: [{containerPort: 8000, name: http, protocol: TCP}]
        resources: {limits: {cpu: 1000m, memory: 1024Mi}}
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
`, nil},
		{"changed, removed, reordered args", `
metadata: {name: d, namespace: n, labels: {}}
spec:
  replicas: 5
  template:
    spec:
      containers:
      - name: vllm
        image: vllm:2
        args: [--b, --a]
        ports: [{containerPort: 8000, name: http, protocol: TCP}]
        resources: {limits: {cpu: "2", memory: 1Gi}}
        env: [{name: A, value: "1"}]
`, []string{
			".metadata.labels.app removed",
			".spec.replicas changed",
			".spec.template.spec.containers[name=vllm].args changed",
			".spec.template.spec.containers[name=vllm].image changed",
			".spec.template.spec.containers[name=vllm].resources.limits.cpu changed",
			".spec.template.spec.tolerations removed",
		}},
		{"container gone", `
spec:
  replicas: 2
  template:
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]
      containers: [{name: other, image: x}]
metadata: {labels: {app: d}}
`, []string{".spec.template.spec.containers[name=vllm] removed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range compareObject(obj(t, desired), obj(t, "apiVersion: apps/v1\nkind: Deployment\n"+tc.live)) {
				got = append(got, d.path.String()+" "+d.change)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestPathString(t *testing.T) {
	p := path{}.child("metadata").child("annotations").child("argocd.argoproj.io/sync-wave")
	if got := p.String(); got != `.metadata.annotations["argocd.argoproj.io/sync-wave"]` {
		t.Errorf("got %s", got)
	}
	q := path{}.child("spec").child("containers").keyed(map[string]any{"name": "api"}).child("env").indexed(0)
	if got := q.String(); got != ".spec.containers[name=api].env[0]" {
		t.Errorf("got %s", got)
	}
	if ptr, ok := (path{}).child("spec").child("replicas").JSONPointer(); !ok || ptr != "/spec/replicas" {
		t.Errorf("pointer %s %v", ptr, ok)
	}
}

// TestAttributionAndAllowedOwners feeds compare() managedFields as the API server writes them.
func TestAttributionAndAllowedOwners(t *testing.T) {
	desired := &unstructured.Unstructured{Object: obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: n}
spec:
  replicas: 2
  template:
    spec:
      containers: [{name: api, image: api:1}]
`)}
	live := &unstructured.Unstructured{Object: obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: n, labels: {team: x}}
spec:
  replicas: 7
  template:
    spec:
      containers: [{name: api, image: api:1, env: [{name: DEBUG, value: "1"}]}]
`)}
	mf := func(manager, op, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Subresource: sub,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	base := mf("argocd-controller", "Apply", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"api\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`)
	env := mf("kubectl-set", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"api\"}":{"f:env":{".":{},"k:{\"name\":\"DEBUG\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`)
	label := mf("kubectl-label", "Update", "", `{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}`)
	cases := []struct {
		name     string
		replicas metav1.ManagedFieldsEntry
		want     []string
	}{
		{"scaled by a person", mf("kubectl", "Update", "scale", `{"f:spec":{"f:replicas":{}}}`), []string{
			".metadata.labels added kubectl-label/",
			".spec.replicas changed kubectl/scale",
			".spec.template.spec.containers[name=api].env added kubectl-set/",
		}},
		{"scaled by the HPA controller", mf("kube-controller-manager", "Update", "scale", `{"f:spec":{"f:replicas":{}}}`), []string{
			".metadata.labels added kubectl-label/",
			".spec.template.spec.containers[name=api].env added kubectl-set/",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := live.DeepCopy()
			l.SetManagedFields([]metav1.ManagedFieldsEntry{base, tc.replicas, env, label})
			var got []string
			for _, f := range compare(desired, l, DefaultOptions()) {
				got = append(got, f.Path+" "+f.Change+" "+f.Manager+"/"+f.Subresource)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
