package policy

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/llm-gitops/platform/internal/engine/manifest"
	"github.com/llm-gitops/platform/internal/engine/render"
)

const policiesDir = "../../../policies"

// corpusNamespaceLabels is how the corpus namespaces are labelled (testdata/corpus/README.md):
// every llm-* namespace is a prod namespace.
var corpusNamespaceLabels = map[string]string{"platform.llm/env": "prod"}

func loadSet(t testing.TB) *Set {
	t.Helper()
	s, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatalf("load %s: %v", policiesDir, err)
	}
	return s
}

var wantPolicies = []string{
	"llm-batch-priority",
	"llm-gpu-autoscaling-no-cpu-memory",
	"llm-gpu-requests-equal-limits",
	"llm-gpu-scheduling",
	"llm-gpu-taint-only-gpu-pods",
	"llm-images-pinned",
	"llm-inference-min-replicas-prod",
	"llm-no-shared-gpu-prod",
	"llm-vllm-startup-probe",
}

func TestLoadPolicies(t *testing.T) {
	s := loadSet(t)
	if got := s.Policies(); !reflect.DeepEqual(got, wantPolicies) {
		t.Errorf("policies = %v, want %v", got, wantPolicies)
	}
	if got := s.Bindings(); len(got) != len(wantPolicies) {
		t.Errorf("bindings = %v, want one per policy", got)
	}
}

// The kustomize-rendered policies/ (what Argo CD or kubectl apply -k would install) is the same set.
func TestKustomizeRenderedPolicies(t *testing.T) {
	abs, err := filepath.Abs(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize %s: %v", policiesDir, err)
	}
	data, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(objs)
	if err != nil {
		t.Fatalf("rendered policies: %v", err)
	}
	if got := s.Policies(); !reflect.DeepEqual(got, wantPolicies) {
		t.Errorf("rendered policies = %v, want %v", got, wantPolicies)
	}
	// Every YAML file of policies/ is in the kustomization.
	files, _ := filepath.Glob(filepath.Join(policiesDir, "*.yaml"))
	loaded, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Bindings()) != len(s.Bindings()) {
		t.Errorf("%d YAML files hold %d bindings, kustomization renders %d: a file is missing from kustomization.yaml",
			len(files), len(loaded.Bindings()), len(s.Bindings()))
	}
}

type corpusCase struct {
	file   string
	objs   []*unstructured.Unstructured
	expect []string
}

func readCorpus(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		c := corpusCase{file: filepath.Base(f), objs: objs}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "# expect:"); ok {
				c.expect = append(c.expect, strings.TrimSpace(rest))
			}
		}
		sort.Strings(c.expect)
		cases = append(cases, c)
	}
	return cases
}

func TestCorpus(t *testing.T) {
	s := loadSet(t)
	cases := readCorpus(t)
	var good, bad int
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			switch {
			case strings.HasPrefix(c.file, "good-"):
				good++
				if len(c.expect) > 0 {
					t.Fatalf("good file with expectations %v", c.expect)
				}
			case strings.HasPrefix(c.file, "bad-"):
				bad++
				if len(c.expect) == 0 {
					t.Fatalf("bad file without '# expect: <policy>' lines")
				}
			default:
				t.Fatalf("corpus files are named good-*.yaml or bad-*.yaml")
			}
			if len(c.objs) != 1 {
				t.Fatalf("want exactly one object per corpus file, got %d", len(c.objs))
			}
			var got []string
			vs := s.Evaluate(c.objs[0], corpusNamespaceLabels)
			for _, v := range vs {
				got = append(got, v.Policy)
				if v.Message == "" || v.Binding == "" {
					t.Errorf("incomplete violation %+v", v)
				}
				if strings.Contains(v.Message, "failed to configure") || strings.Contains(v.Message, "no such key") {
					t.Errorf("configuration/evaluation error instead of a verdict: %s", v)
				}
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, c.expect) {
				t.Errorf("violations %v, want %v; details:\n%s", got, c.expect, violationList(vs))
			}
			for _, v := range vs {
				t.Logf("%s", v)
			}
		})
	}
	if good < 10 || bad < 10 || good+bad < 20 {
		t.Errorf("corpus too small: %d good, %d bad", good, bad)
	}
}

func violationList(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

func TestCorpusCoversEveryPolicy(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range readCorpus(t) {
		for _, e := range c.expect {
			seen[e] = true
		}
	}
	for _, p := range wantPolicies {
		if !seen[p] {
			t.Errorf("no bad corpus file expects a violation of %s", p)
		}
	}
}

func mustDecode(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/corpus", file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %v (%d objects)", file, err, len(objs))
	}
	return objs[0]
}

// The prod-only rules are bound by namespace label platform.llm/env=prod: in dev they do not apply.
func TestProdRulesOnlyInProdNamespaces(t *testing.T) {
	s := loadSet(t)
	for _, file := range []string{"bad-shared-gpu-prod.yaml", "bad-scaledobject-min-zero-prod.yaml"} {
		obj := mustDecode(t, file)
		if vs := s.Evaluate(obj, map[string]string{"platform.llm/env": "dev"}); len(vs) != 0 {
			t.Errorf("%s in a dev namespace: %v, want none", file, vs)
		}
		if vs := s.Evaluate(obj, nil); len(vs) != 0 {
			t.Errorf("%s in an unlabelled namespace: %v, want none", file, vs)
		}
	}
}

// Bindings are limited to the platform namespaces by name (kubernetes.io/metadata.name).
func TestOtherNamespacesIgnored(t *testing.T) {
	s := loadSet(t)
	obj := mustDecode(t, "bad-image-latest.yaml")
	obj.SetNamespace("kube-system")
	if vs := s.Evaluate(obj, corpusNamespaceLabels); len(vs) != 0 {
		t.Errorf("kube-system object: %v, want none", vs)
	}
	obj.SetNamespace("")
	if vs := s.Evaluate(obj, nil); len(vs) != 0 {
		t.Errorf("object without namespace (default): %v, want none", vs)
	}
}

// Without the param ConfigMap the GPU scheduling binding denies (parameterNotFoundAction Deny),
// as the API server would. Like the API server's dispatcher, params are collected before the
// matchConditions run, so every object the binding matches is denied, GPU or not.
func TestMissingParamDenies(t *testing.T) {
	fsys := fstest.MapFS{}
	entries, err := os.ReadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "gpu-cards-params.yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(policiesDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fsys[e.Name()] = &fstest.MapFile{Data: data}
	}
	s, err := Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	vs := s.Evaluate(mustDecode(t, "good-vllm-deployment.yaml"), corpusNamespaceLabels)
	if len(vs) != 1 || vs[0].Policy != "llm-gpu-scheduling" || !strings.Contains(vs[0].Message, "no params found") {
		t.Errorf("GPU pod without the param: %v, want one llm-gpu-scheduling 'no params found' denial", vs)
	}
	if vs := s.Evaluate(mustDecode(t, "good-cpu-deployment.yaml"), corpusNamespaceLabels); len(vs) != 1 || vs[0].Policy != "llm-gpu-scheduling" {
		t.Errorf("CPU pod without the param: %v, want the llm-gpu-scheduling denial", vs)
	}
}

// The param decides the cards: with only t4 allowed, an l40s pod is denied.
func TestParamCards(t *testing.T) {
	s := loadSet(t)
	for _, objs := range s.params {
		for _, o := range objs {
			if o.GetName() == "llm-gpu-cards" {
				if err := unstructured.SetNestedField(o.Object, "t4", "data", "cards"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// (the param store holds these very objects)
	vs := s.Evaluate(mustDecode(t, "good-vllm-deployment.yaml"), corpusNamespaceLabels)
	if len(vs) != 1 || vs[0].Policy != "llm-gpu-scheduling" || !strings.Contains(vs[0].Message, "accelerator In") {
		t.Errorf("l40s pod with cards=t4: %v, want the affinity violation", vs)
	}
}

const brokenPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: broken-cel
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["deployments"]
  validations:
    - expression: "object.spec.replicas >= 1"
    - expression: "object.spec.replicas >>= 1"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: broken-cel
spec:
  policyName: broken-cel
  validationActions: [Deny]
`

func TestBrokenCELNamesPolicy(t *testing.T) {
	_, err := Load(fstest.MapFS{"broken.yaml": {Data: []byte(brokenPolicy)}})
	if err == nil {
		t.Fatal("broken CEL loaded without error")
	}
	for _, want := range []string{"broken-cel", "spec.validations[1].expression", "object.spec.replicas >>= 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	t.Log(err)

	// A type error (non-bool validation) and an unknown variable are rejected too.
	for _, bad := range []string{`"object.metadata.name"`, `"variables.nope == 1"`} {
		p := strings.Replace(brokenPolicy, `"object.spec.replicas >>= 1"`, bad, 1)
		if _, err := Load(fstest.MapFS{"broken.yaml": {Data: []byte(p)}}); err == nil || !strings.Contains(err.Error(), "broken-cel") {
			t.Errorf("expression %s: error %v, want one naming broken-cel", bad, err)
		}
	}
}

func TestBindingToUnknownPolicy(t *testing.T) {
	doc := strings.SplitN(brokenPolicy, "---", 2)[1]
	if _, err := Load(fstest.MapFS{"b.yaml": {Data: []byte(doc)}}); err == nil || !strings.Contains(err.Error(), "broken-cel") {
		t.Errorf("binding without its policy: %v", err)
	}
}

// Every object of every rendered overlay passes every policy, namespaces labelled as rendered
// plus platform.llm/env=<env> (README.md: how a cluster's namespaces are to be labelled).
func TestOverlaysPassPolicies(t *testing.T) {
	s := loadSet(t)
	src, err := render.FromDir("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"dev", "staging", "prod"} {
		t.Run(env, func(t *testing.T) {
			res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: env})
			if err != nil {
				t.Fatal(err)
			}
			nsLabels := map[string]map[string]string{}
			for _, o := range res.Objects {
				if o.GetKind() == "Namespace" {
					l := o.GetLabels()
					if l == nil {
						l = map[string]string{}
					}
					l["platform.llm/env"] = env
					nsLabels[o.GetName()] = l
				}
			}
			evaluated := 0
			for _, o := range res.Objects {
				labels := nsLabels[o.GetNamespace()]
				if labels == nil {
					labels = map[string]string{"platform.llm/env": env}
				}
				for _, v := range s.Evaluate(o, labels) {
					t.Errorf("%s: %s", env, v)
				}
				switch o.GetKind() {
				case "Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "ScaledObject", "HorizontalPodAutoscaler":
					evaluated++
				}
			}
			if evaluated < 5 {
				t.Errorf("only %d workload/autoscaler objects rendered", evaluated)
			}
			// Negative control: the policies do match the rendered objects.
			for _, o := range res.Objects {
				component, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "labels", "platform.llm/component")
				if o.GetKind() != "Deployment" || o.GetNamespace() != "llm-inference" || component != "vllm" {
					continue // the model servers; the endpoint pickers beside them are not GPU workloads
				}
				c := o.DeepCopy()
				containers, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers")
				containers[0].(map[string]any)["image"] = "vllm/vllm-openai:latest"
				_ = unstructured.SetNestedSlice(c.Object, containers, "spec", "template", "spec", "containers")
				unstructured.RemoveNestedField(c.Object, "spec", "template", "spec", "tolerations")
				var got []string
				for _, v := range s.Evaluate(c, nsLabels["llm-inference"]) {
					got = append(got, v.Policy)
				}
				sort.Strings(got)
				if want := []string{"llm-gpu-scheduling", "llm-images-pinned"}; !reflect.DeepEqual(got, want) {
					t.Errorf("%s with :latest and no toleration: %v, want %v", ObjectID(o), got, want)
				}
			}
		})
	}
}
