package drift_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// builtins types the built-in kinds these tests use, offline, from the compiled-in API schema.
var builtins = argocd.StaticSchema([]schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ConfigMap"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
})

func parse(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(data))
	return u
}

func mf(manager, op, sub, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Subresource: sub,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

const gitDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: llm
  annotations: {rollout: "1"}
spec:
  replicas: 2
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]
      containers:
      - name: vllm
        image: vllm:0.11
        args: ["--max-num-seqs=64"]
        ports: [{containerPort: 8000}]
        env: [{name: HF_HUB_OFFLINE, value: "1"}, {name: VERSION, value: "1.10"}]
        resources:
          requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: 1}
          limits: {memory: 1Gi, nvidia.com/gpu: 1}
`

// applied is the live object right after a server-side apply of gitDeployment: defaults filled
// in, quantities in canonical form, the applier owning what it sent.
func applied(t testing.TB) *unstructured.Unstructured {
	l := parse(t, gitDeployment)
	c := l.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["ports"] = []any{map[string]any{"containerPort": int64(8000), "protocol": "TCP"}}
	c["imagePullPolicy"] = "IfNotPresent"
	c["resources"].(map[string]any)["requests"].(map[string]any)["nvidia.com/gpu"] = "1"
	c["resources"].(map[string]any)["limits"].(map[string]any)["nvidia.com/gpu"] = "1"
	l.Object["status"] = map[string]any{"replicas": int64(2)}
	l.SetManagedFields([]metav1.ManagedFieldsEntry{mf("argocd-controller", "Apply", "", `{"f:metadata":{"f:annotations":{"f:rollout":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:tolerations":{},"f:containers":{"k:{\"name\":\"vllm\"}":{".":{},"f:image":{},"f:args":{},"f:name":{},"f:env":{"k:{\"name\":\"HF_HUB_OFFLINE\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`)})
	return l
}

// settle does to managedFields what the API server's field manager does after a write: a field
// that is gone is owned by nobody, and a field the latest writer set is owned by it alone.
func settle(t testing.TB, l *unstructured.Unstructured) {
	t.Helper()
	pt := builtins.Type(l.GroupVersionKind())
	tv, err := pt.FromUnstructured(l.Object)
	require.NoError(t, err)
	present, err := tv.ToFieldSet()
	require.NoError(t, err)
	entries := l.GetManagedFields()
	sets := make([]*fieldpath.Set, len(entries))
	for i, e := range entries {
		sets[i] = &fieldpath.Set{}
		require.NoError(t, sets[i].FromJSON(bytes.NewReader(e.FieldsV1.Raw)))
		sets[i] = sets[i].Intersection(present)
	}
	for i := range entries {
		for j := i + 1; j < len(entries); j++ {
			sets[i] = sets[i].Difference(sets[j])
		}
		raw, err := sets[i].ToJSON()
		require.NoError(t, err)
		entries[i].FieldsV1 = &metav1.FieldsV1{Raw: raw}
	}
	l.SetManagedFields(entries)
}

type edit func(live map[string]any)

func container(live map[string]any) map[string]any {
	return live["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
}

func TestCompareObjectByValue(t *testing.T) {
	cases := []struct {
		name    string
		edit    edit
		writer  metav1.ManagedFieldsEntry
		want    []string // path change desired→live manager
		spelled string   // Git spelling changes applied to desired
		// autoscaled: an HPA targets the Deployment
		autoscaled bool
	}{
		{name: "in sync after apply"},
		{name: "quantity spelled differently in Git", spelled: "1000m", want: nil},
		{name: "env var removed by kubectl set env X-",
			edit: func(l map[string]any) {
				c := container(l)
				c["env"] = c["env"].([]any)[1:]
			},
			want: []string{`.spec.template.spec.containers[name=vllm].env[name=HF_HUB_OFFLINE] removed map[name:HF_HUB_OFFLINE value:1]→<nil> `}},
		{name: "every env var unset: the list is gone, each declared item is named",
			edit: func(l map[string]any) {
				delete(container(l), "env")
			},
			want: []string{
				`.spec.template.spec.containers[name=vllm].env[name=HF_HUB_OFFLINE] removed map[name:HF_HUB_OFFLINE value:1]→<nil> `,
				`.spec.template.spec.containers[name=vllm].env[name=VERSION] removed map[name:VERSION value:1.10]→<nil> `,
			}},
		{name: "GPU taken away from requests and limits",
			edit: func(l map[string]any) {
				r := container(l)["resources"].(map[string]any)
				delete(r["requests"].(map[string]any), "nvidia.com/gpu")
				delete(r["limits"].(map[string]any), "nvidia.com/gpu")
			},
			want: []string{
				`.spec.template.spec.containers[name=vllm].resources.limits["nvidia.com/gpu"] removed 1→<nil> `,
				`.spec.template.spec.containers[name=vllm].resources.requests["nvidia.com/gpu"] removed 1→<nil> `,
			}},
		{name: "image changed under the applier's own name",
			edit:   func(l map[string]any) { container(l)["image"] = "vllm:evil" },
			writer: mf("argocd-controller", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"vllm\"}":{"f:image":{}}}}}}}`),
			want:   []string{`.spec.template.spec.containers[name=vllm].image changed vllm:0.11→vllm:evil argocd-controller`}},
		{name: "annotation 1 to 1.0 is a string, not a quantity",
			edit: func(l map[string]any) {
				l["metadata"].(map[string]any)["annotations"].(map[string]any)["rollout"] = "1.0"
			},
			writer: mf("kubectl-annotate", "Update", "", `{"f:metadata":{"f:annotations":{"f:rollout":{}}}}`),
			want:   []string{`.metadata.annotations.rollout changed 1→1.0 kubectl-annotate`}},
		{name: "env value 1.10 to 1.1",
			edit:   func(l map[string]any) { container(l)["env"].([]any)[1].(map[string]any)["value"] = "1.1" },
			writer: mf("kubectl-edit", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"vllm\"}":{"f:env":{"k:{\"name\":\"VERSION\"}":{"f:value":{}}}}}}}}}`),
			want:   []string{`.spec.template.spec.containers[name=vllm].env[name=VERSION].value changed 1.10→1.1 kubectl-edit`}},
		{name: "replicas raised by the HPA through the scale subresource",
			edit:       func(l map[string]any) { l["spec"].(map[string]any)["replicas"] = int64(5) },
			writer:     mf("kube-controller-manager", "Update", "scale", `{"f:spec":{"f:replicas":{}}}`),
			autoscaled: true},
		{name: "a scale write under the HPA's name to an object no HPA targets",
			edit:   func(l map[string]any) { l["spec"].(map[string]any)["replicas"] = int64(0) },
			writer: mf("kube-controller-manager", "Update", "scale", `{"f:spec":{"f:replicas":{}}}`),
			want:   []string{`.spec.replicas changed 2→0 kube-controller-manager`}},
		{name: "replicas raised by kubectl scale",
			edit:   func(l map[string]any) { l["spec"].(map[string]any)["replicas"] = int64(5) },
			writer: mf("kubectl", "Update", "scale", `{"f:spec":{"f:replicas":{}}}`),
			want:   []string{`.spec.replicas changed 2→5 kubectl`}},
		{name: "toleration edited inside an atomic list",
			edit: func(l map[string]any) {
				tol := l["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["tolerations"].([]any)
				tol[0].(map[string]any)["tolerationSeconds"] = int64(30)
				tol[0].(map[string]any)["effect"] = "NoExecute"
			},
			writer: mf("kubectl-edit", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:tolerations":{}}}}}`),
			want: []string{
				`.spec.template.spec.tolerations[0].effect changed NoSchedule→NoExecute kubectl-edit`,
				`.spec.template.spec.tolerations[0].tolerationSeconds added <nil>→30 kubectl-edit`,
			}},
		{name: "env var added by kubectl set env",
			edit: func(l map[string]any) {
				c := container(l)
				c["env"] = append(c["env"].([]any), map[string]any{"name": "DEBUG", "value": "1"})
			},
			writer: mf("kubectl-set", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"vllm\"}":{"f:env":{"k:{\"name\":\"DEBUG\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`),
			want:   []string{`.spec.template.spec.containers[name=vllm].env[name=DEBUG] added <nil>→map[name:DEBUG value:1] kubectl-set`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := parse(t, gitDeployment)
			if tc.spelled != "" {
				container(d.Object)["resources"].(map[string]any)["requests"].(map[string]any)["cpu"] = tc.spelled
			}
			l := applied(t)
			if tc.edit != nil {
				tc.edit(l.Object)
			}
			if tc.writer.Manager != "" {
				l.SetManagedFields(append(l.GetManagedFields(), tc.writer))
			}
			settle(t, l)
			opts := drift.DefaultOptions()
			opts.Schema = builtins
			opts.Autoscaled = func(schema.GroupKind, string, string) bool { return tc.autoscaled }
			o := drift.CompareObject(d, l, nil, &opts)
			var got []string
			if o != nil {
				assert.Empty(t, o.Schema, "compared with the schema")
				for _, f := range o.Fields {
					got = append(got, f.Path+" "+f.Change+" "+fmtValue(f.Desired)+"→"+fmtValue(f.Live)+" "+f.Manager)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func fmtValue(v any) string {
	if v == nil {
		return "<nil>"
	}
	b, _ := json.Marshal(v)
	s := string(b)
	if str, ok := v.(string); ok {
		return str
	}
	r := strings.NewReplacer(`"`, "", "{", "map[", "}", "]", ",", " ")
	return r.Replace(s)
}

// TestServicePortsKeyedByPortAndProtocol: 53/TCP and 53/UDP are two items, and an edit of the
// UDP one is named by both keys.
func TestServicePortsKeyedByPortAndProtocol(t *testing.T) {
	git := `
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: ns1}
spec:
  ports:
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 5353}
  - {name: dns-udp, port: 53, protocol: UDP, targetPort: 5353}
`
	d, l := parse(t, git), parse(t, git)
	l.Object["spec"].(map[string]any)["ports"].([]any)[1].(map[string]any)["targetPort"] = int64(5454)
	l.SetManagedFields([]metav1.ManagedFieldsEntry{mf("kubectl-edit", "Update", "", `{"f:spec":{"f:ports":{"k:{\"port\":53,\"protocol\":\"UDP\"}":{"f:targetPort":{}}}}}`)})
	opts := drift.DefaultOptions()
	opts.Schema = builtins
	o := drift.CompareObject(d, l, nil, &opts)
	require.NotNil(t, o)
	require.Len(t, o.Fields, 1)
	assert.Equal(t, ".spec.ports[port=53,protocol=UDP].targetPort", o.Fields[0].Path)
	assert.Equal(t, "kubectl-edit", o.Fields[0].Manager)
	data, err := json.Marshal(o.Fields[0].FieldPath)
	require.NoError(t, err)
	assert.JSONEq(t, `["f:spec","f:ports","k:{\"port\":53,\"protocol\":\"UDP\"}","f:targetPort"]`, string(data))
}

// TestKindWithoutSchemaIsDeduced: a kind the schema lacks compares maps by key and says so.
func TestKindWithoutSchemaIsDeduced(t *testing.T) {
	git := `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: ns1}
spec: {size: "1000m", parts: [a, b]}
`
	d, l := parse(t, git), parse(t, git)
	l.Object["spec"].(map[string]any)["size"] = "1"
	opts := drift.DefaultOptions()
	o := drift.CompareObject(d, l, nil, &opts)
	require.NotNil(t, o, "without a schema, 1000m and 1 are different strings")
	assert.Contains(t, o.Schema, "deduced")
	assert.Equal(t, ".spec.size", o.Fields[0].Path)
}

// TestRemovalAttributedFromWatchedVersions: nobody owns a removed field, but the watch saw the
// update that removed it and whose managedFields entry changed then.
func TestRemovalAttributedFromWatchedVersions(t *testing.T) {
	d := parse(t, gitDeployment)
	before := applied(t)
	before.SetResourceVersion("1")
	after := applied(t)
	after.SetResourceVersion("2")
	c := container(after.Object)
	c["env"] = c["env"].([]any)[1:]
	now := metav1.Now()
	w := mf("kubectl-set", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"vllm\"}":{"f:env":{}}}}}}}`)
	w.Time = &now
	after.SetManagedFields(append(after.GetManagedFields(), w))
	settle(t, after)
	opts := drift.DefaultOptions()
	opts.Schema = builtins

	o := drift.CompareObject(d, after, nil, &opts)
	require.NotNil(t, o)
	assert.Empty(t, o.Fields[0].Manager, "without a watch nobody can be named")

	o = drift.CompareObject(d, after, []*unstructured.Unstructured{after, before}, &opts)
	require.NotNil(t, o)
	assert.Equal(t, drift.Removed, o.Fields[0].Change)
	assert.Equal(t, "kubectl-set", o.Fields[0].Manager)
}

func TestSecretValuesAreKeyedHMACs(t *testing.T) {
	git := `
apiVersion: v1
kind: Secret
metadata: {name: s, namespace: ns1}
stringData: {token: hunter2}
`
	d := parse(t, git)
	l := parse(t, `
apiVersion: v1
kind: Secret
metadata: {name: s, namespace: ns1}
data: {token: aHVudGVyMw==}
`)
	for _, key := range [][]byte{nil, []byte("install-key")} {
		opts := drift.DefaultOptions()
		opts.Schema, opts.SecretKey = builtins, key
		o := drift.CompareObject(d, l, nil, &opts)
		require.NotNil(t, o)
		out, err := json.Marshal(o)
		require.NoError(t, err)
		for _, secret := range []string{"hunter2", "hunter3", "aHVudGVyMw==", "aHVudGVyMg=="} {
			assert.NotContains(t, string(out), secret)
		}
		if key == nil {
			assert.Equal(t, drift.Redacted, o.Fields[0].Live)
		} else {
			assert.True(t, strings.HasPrefix(o.Fields[0].Live.(string), "hmac-sha256:"))
			assert.NotEqual(t, o.Fields[0].Desired, o.Fields[0].Live)
		}
	}
}

func TestFieldPathJSONRoundTrip(t *testing.T) {
	raw := `["f:spec","f:template","f:spec","f:containers","k:{\"name\":\"vllm\"}","f:env","k:{\"name\":\"X\"}"]`
	var p drift.FieldPath
	require.NoError(t, json.Unmarshal([]byte(raw), &p))
	assert.Equal(t, ".spec.template.spec.containers[name=vllm].env[name=X]", drift.Display(p.Path()))
	back, err := json.Marshal(p)
	require.NoError(t, err)
	assert.JSONEq(t, raw, string(back))
}

// TestAddedFieldIsWhatTheWriterAdded: Git declares no annotations or labels. The applier's
// tracking annotation and the Deployment controller's revision annotation share the map the
// applier made: neither is drift. A label kubectl adds is named by its key.
func TestAddedFieldIsWhatTheWriterAdded(t *testing.T) {
	git := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: bare, namespace: ns1}
spec:
  selector: {matchLabels: {app: bare}}
  template:
    metadata: {labels: {app: bare}}
    spec:
      containers: [{name: app, image: app:1}]
`
	d, l := parse(t, git), parse(t, git)
	l.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "llm-prod:apps/Deployment:ns1/bare", "deployment.kubernetes.io/revision": "1"})
	l.SetManagedFields([]metav1.ManagedFieldsEntry{
		mf("argocd-controller", "Apply", "", `{"f:metadata":{"f:annotations":{"f:argocd.argoproj.io/tracking-id":{}}},"f:spec":{"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
		mf("kube-controller-manager", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:deployment.kubernetes.io/revision":{}}}}`),
	})
	opts := drift.DefaultOptions()
	opts.Schema = builtins
	opts.Normalizer = nil
	assert.Nil(t, drift.CompareObject(d, l, nil, &opts), "the applier's and the controller's annotations are not drift")

	l.SetLabels(map[string]string{"team": "search"})
	l.SetManagedFields(append(l.GetManagedFields(), mf("kubectl-label", "Update", "", `{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}`)))
	o := drift.CompareObject(d, l, nil, &opts)
	require.NotNil(t, o)
	require.Len(t, o.Fields, 1)
	assert.Equal(t, []any{".metadata.labels", drift.Added, "kubectl-label"}, []any{o.Fields[0].Path, o.Fields[0].Change, o.Fields[0].Manager},
		"kubectl made the labels map: the map is what it added")
}

// TestEditsInsideAtomicValuesAndDefaultedKeys are edits a shortcut that lets live carry extra
// keys would miss: a key added to an atomic map or to an item of an atomic list, a defaulted key
// field flipped, and fields written under the applier's own name. Each is drift, whoever wrote it.
func TestEditsInsideAtomicValuesAndDefaultedKeys(t *testing.T) {
	const svc = `
apiVersion: v1
kind: Service
metadata: {name: s, namespace: ns1}
spec:
  selector: {app: s}
  ports: [{port: 53, targetPort: 53}]
`
	const pod = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: ns1}
spec:
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}}
    spec:
      nodeSelector: {pool: gpu}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers: [{name: c, image: c:1, env: [{name: A, value: "1"}]}]
`
	const netpol = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: np, namespace: ns1}
spec:
  podSelector: {matchLabels: {app: d}}
  policyTypes: [Ingress]
`
	spec := func(l map[string]any) map[string]any { return l["spec"].(map[string]any) }
	podSpec := func(l map[string]any) map[string]any {
		return spec(l)["template"].(map[string]any)["spec"].(map[string]any)
	}
	cases := []struct {
		name, git string
		edit      edit
		writer    metav1.ManagedFieldsEntry
		want      []string
	}{
		{"key added to a Service selector (atomic map)", svc,
			func(l map[string]any) { spec(l)["selector"].(map[string]any)["track"] = "shadow" },
			mf("kubectl-patch", "Update", "", `{"f:spec":{"f:selector":{}}}`),
			[]string{".spec.selector.track added kubectl-patch"}},
		{"a key named status added to a Service selector", svc,
			func(l map[string]any) { spec(l)["selector"].(map[string]any)["status"] = "canary" },
			mf("kubectl-patch", "Update", "", `{"f:spec":{"f:selector":{}}}`),
			[]string{".spec.selector.status added kubectl-patch"}},
		{"defaulted key field flipped: 53/TCP became 53/UDP", svc,
			func(l map[string]any) { spec(l)["ports"].([]any)[0].(map[string]any)["protocol"] = "UDP" },
			mf("argocd-controller", "Update", "", `{"f:spec":{"f:ports":{"k:{\"port\":53,\"protocol\":\"UDP\"}":{".":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}}}}`),
			// The applier's item 53/TCP is gone; 53/UDP is another item, which the writer added.
			[]string{".spec.ports[port=53,protocol=TCP] removed ", ".spec.ports[port=53,protocol=UDP].protocol added argocd-controller"}},
		{"node pinned by hand (atomic nodeSelector)", pod,
			func(l map[string]any) {
				podSpec(l)["nodeSelector"].(map[string]any)["kubernetes.io/hostname"] = "node-7"
			},
			mf("kubectl-patch", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:nodeSelector":{}}}}}`),
			[]string{`.spec.template.spec.nodeSelector["kubernetes.io/hostname"] added kubectl-patch`}},
		{"tolerationSeconds added to the GPU toleration (atomic list)", pod,
			func(l map[string]any) {
				podSpec(l)["tolerations"].([]any)[0].(map[string]any)["tolerationSeconds"] = int64(30)
			},
			mf("argocd-controller", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:tolerations":{}}}}}`),
			[]string{".spec.template.spec.tolerations[0].tolerationSeconds added argocd-controller"}},
		{"privileged added under the applier's name", pod,
			func(l map[string]any) {
				podSpec(l)["containers"].([]any)[0].(map[string]any)["securityContext"] = map[string]any{"privileged": true}
			},
			mf("argocd-controller", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{"f:securityContext":{".":{},"f:privileged":{}}}}}}}}`),
			[]string{".spec.template.spec.containers[name=c].securityContext added argocd-controller"}},
		{"env var server-side applied under the applier's name", pod,
			func(l map[string]any) {
				c := podSpec(l)["containers"].([]any)[0].(map[string]any)
				c["env"] = append(c["env"].([]any), map[string]any{"name": "B", "value": "2"})
			},
			mf("argocd-controller", "Apply", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{"f:env":{"k:{\"name\":\"B\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`),
			[]string{".spec.template.spec.containers[name=c].env[name=B] added argocd-controller"}},
		{"NetworkPolicy podSelector narrowed (atomic LabelSelector)", netpol,
			func(l map[string]any) {
				spec(l)["podSelector"].(map[string]any)["matchLabels"].(map[string]any)["never"] = "matches"
			},
			mf("kubectl-edit", "Update", "", `{"f:spec":{"f:podSelector":{}}}`),
			[]string{".spec.podSelector.matchLabels.never added kubectl-edit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, l := parse(t, tc.git), parse(t, tc.git)
			tc.edit(l.Object)
			l.SetManagedFields([]metav1.ManagedFieldsEntry{tc.writer})
			opts := drift.DefaultOptions()
			opts.Schema = builtins
			o := drift.CompareObject(d, l, nil, &opts)
			var got []string
			if o != nil {
				for _, f := range o.Fields {
					got = append(got, f.Path+" "+f.Change+" "+f.Manager)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestBoundClaimIsNotDrift: a PersistentVolumeClaim Git declares is bound by the PV controller
// (volumeName, bind annotations) after the scheduler picked a node: none of it is drift. The
// same volumeName written by a person is.
func TestBoundClaimIsNotDrift(t *testing.T) {
	git := `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: ns1}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
`
	bind := func(l *unstructured.Unstructured) {
		l.Object["spec"].(map[string]any)["volumeName"] = "pvc-123"
		l.SetAnnotations(map[string]string{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
			"volume.kubernetes.io/storage-provisioner": "ebs.csi.aws.com", "volume.kubernetes.io/selected-node": "gpu-1"})
	}
	d, l := parse(t, git), parse(t, git)
	bind(l)
	l.SetManagedFields([]metav1.ManagedFieldsEntry{
		mf("argocd-controller", "Apply", "", `{"f:spec":{"f:accessModes":{},"f:resources":{"f:requests":{"f:storage":{}}}}}`),
		mf("kube-scheduler", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:volume.kubernetes.io/selected-node":{}}}}`),
		mf("kube-controller-manager", "Update", "", `{"f:metadata":{"f:annotations":{"f:pv.kubernetes.io/bind-completed":{},"f:pv.kubernetes.io/bound-by-controller":{},"f:volume.kubernetes.io/storage-provisioner":{}}},"f:spec":{"f:volumeName":{}}}`),
	})
	opts := drift.DefaultOptions()
	opts.Schema = argocd.StaticSchema([]schema.GroupVersionKind{{Version: "v1", Kind: "PersistentVolumeClaim"}})
	if o := drift.CompareObject(d, l, nil, &opts); o != nil {
		t.Fatalf("a bound claim drifted: %+v", o.Fields)
	}
	l.SetManagedFields(append(l.GetManagedFields()[:2], mf("kubectl-patch", "Update", "", `{"f:spec":{"f:volumeName":{}}}`)))
	o := drift.CompareObject(d, l, nil, &opts)
	require.NotNil(t, o)
	assert.Equal(t, ".spec.volumeName", o.Fields[len(o.Fields)-1].Path)
}

// TestControllerRuleOnAKeyOfAMapGitLeavesOut: Git declares no annotations, so the controller that
// wrote one made the map. Its rule names the key it writes, and the map is no drift; another key
// in that map is, reported alone, whoever wrote it.
func TestControllerRuleOnAKeyOfAMapGitLeavesOut(t *testing.T) {
	git := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: bare, namespace: ns1}
spec:
  selector: {matchLabels: {app: bare}}
  template:
    metadata: {labels: {app: bare}}
    spec:
      containers: [{name: app, image: app:1}]
`
	applier := mf("argocd-controller", "Apply", "", `{"f:spec":{"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`)
	opts := drift.DefaultOptions()
	opts.Schema = builtins
	type got struct {
		Path, Manager string
		Live          any
	}
	fields := func(o *drift.Object) []got {
		var out []got
		if o != nil {
			for _, f := range o.Fields {
				out = append(out, got{f.Path, f.Manager, f.Live})
			}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		managers    []metav1.ManagedFieldsEntry
		controllers []drift.ControllerRule
		want        []got
	}{{
		name:        "the Deployment controller's revision after a rollout",
		annotations: map[string]string{"deployment.kubernetes.io/revision": "1"},
		managers:    []metav1.ManagedFieldsEntry{mf("kube-controller-manager", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:deployment.kubernetes.io/revision":{}}}}`)},
	}, {
		name:        "a person's key beside the controller's",
		annotations: map[string]string{"deployment.kubernetes.io/revision": "1", "team": "search"},
		managers: []metav1.ManagedFieldsEntry{
			mf("kube-controller-manager", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:deployment.kubernetes.io/revision":{}}}}`),
			mf("kubectl-annotate", "Update", "", `{"f:metadata":{"f:annotations":{"f:team":{}}}}`),
		},
		want: []got{{`.metadata.annotations.team`, "kubectl-annotate", "search"}},
	}, {
		name:        "a user's rule for one key: the same writer's other key remains, alone",
		annotations: map[string]string{"example.com/hash": "abc", "example.com/owner": "bob"},
		managers:    []metav1.ManagedFieldsEntry{mf("hasher", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:example.com/hash":{},"f:example.com/owner":{}}}}`)},
		controllers: []drift.ControllerRule{{Manager: "hasher", Paths: []string{"/metadata/annotations/example.com~1hash"}}},
		want:        []got{{".metadata.annotations", "hasher", map[string]any{"example.com/owner": "bob"}}},
	}, {
		name:        "a user's rule for one key, and only that key",
		annotations: map[string]string{"example.com/hash": "abc"},
		managers:    []metav1.ManagedFieldsEntry{mf("hasher", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:example.com/hash":{}}}}`)},
		controllers: []drift.ControllerRule{{Manager: "hasher", Paths: []string{"/metadata/annotations/example.com~1hash"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d, l := parse(t, git), parse(t, git)
			l.SetAnnotations(tc.annotations)
			l.SetManagedFields(append([]metav1.ManagedFieldsEntry{applier}, tc.managers...))
			o := opts
			o.Controllers = append(slices.Clone(drift.DefaultControllers), tc.controllers...)
			if diff := cmp.Diff(tc.want, fields(drift.CompareObject(d, l, nil, &o))); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplacedObjectsTrackingAnnotation: a Replace=true sync writes the object as "argocd"
// (an update, not the applier's server-side apply). Its tracking annotation naming the object
// as the audited Application's is Argo CD's bookkeeping, whoever wrote it; one naming another
// object or Application is drift.
func TestReplacedObjectsTrackingAnnotation(t *testing.T) {
	git := `
apiVersion: batch/v1
kind: Job
metadata: {name: sync, namespace: ns1}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: sync, image: sync:1}]
`
	opts := drift.DefaultOptions()
	opts.Schema = builtins
	opts.Normalizer = nil
	opts.Application = "llm-prod"
	for _, tc := range []struct {
		name, id string
		drift    bool
	}{
		{"the Application's own id", "llm-prod:batch/Job:ns1/sync", false},
		{"another Application's id", "llm-dev:batch/Job:ns1/sync", true},
		{"another object's id, copied", "llm-prod:batch/Job:ns1/other", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, l := parse(t, git), parse(t, git)
			l.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": tc.id})
			l.SetManagedFields([]metav1.ManagedFieldsEntry{
				mf("argocd", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:argocd.argoproj.io/tracking-id":{}}},"f:spec":{"f:template":{"f:spec":{"f:restartPolicy":{},"f:containers":{"k:{\"name\":\"sync\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
			})
			o := drift.CompareObject(d, l, nil, &opts)
			if !tc.drift {
				assert.Nil(t, o, "Argo CD's own tracking annotation")
				return
			}
			require.NotNil(t, o)
			require.Len(t, o.Fields, 1)
			assert.Equal(t, drift.Added, o.Fields[0].Change)
		})
	}
}

// TestCompareRenderedSaysARemovedFieldOnce: a field one revision drops from an item of a keyed
// list (a LimitRange's default limits) is one change, removed.
func TestCompareRenderedSaysARemovedFieldOnce(t *testing.T) {
	types := argocd.StaticSchema([]schema.GroupVersionKind{{Version: "v1", Kind: "LimitRange"}})
	from := parse(t, `{apiVersion: v1, kind: LimitRange, metadata: {name: defaults, namespace: llm-monitoring},
  spec: {limits: [{type: Container, defaultRequest: {cpu: 250m}, default: {cpu: "1", memory: 1Gi}}]}}`)
	to := parse(t, `{apiVersion: v1, kind: LimitRange, metadata: {name: defaults, namespace: llm-monitoring},
  spec: {limits: [{type: Container, defaultRequest: {cpu: 250m}}]}}`)
	for _, pt := range []*typed.ParseableType{types.Type(from.GroupVersionKind()), nil} {
		got := drift.CompareRendered(from.Object, to.Object, pt)
		var paths []string
		for _, c := range got {
			paths = append(paths, c.Path+" "+c.Change)
		}
		assert.Equal(t, []string{".spec.limits[0].default " + drift.Removed}, paths)
	}
}
