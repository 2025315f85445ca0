package argocd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func appSetDoc(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	return u
}

func TestGenerateRendersListGeneratorsAsTheControllerWrites(t *testing.T) {
	set := appSetDoc(t, `
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: tenants, namespace: argocd}
spec:
  generators:
  - list:
      elements:
      - {name: a, size: small}
      - {name: b, size: large, values: {team: ml}}
  template:
    metadata:
      name: 'gen-{{name}}'
      labels: {size: '{{size}}'}
    spec:
      project: default
      source: {repoURL: https://git.example/platform.git, targetRevision: main, path: 'gen/{{name}}'}
      destination: {server: https://kubernetes.default.svc, namespace: '{{name}}'}
  ignoreApplicationDifferences:
  - jsonPointers: [/spec/source/targetRevision]
    name: gen-b
`)
	got, err := Generate(set, nil, "argocd")
	require.NoError(t, err)
	require.Empty(t, got.Unsupported)
	require.Len(t, got.Applications, 2)
	want := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "gen-a", "namespace": "argocd", "labels": map[string]any{"size": "small"},
			// Argo CD's template code adds it when the template has no finalizer.
			"finalizers": []any{"resources-finalizer.argocd.argoproj.io"}},
		"spec": map[string]any{"project": "default",
			"source":      map[string]any{"repoURL": "https://git.example/platform.git", "targetRevision": "main", "path": "gen/a"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "a"}},
	}
	assert.Empty(t, cmp.Diff(want, got.Applications[0].Object))
	assert.Equal(t, "gen-b", got.Applications[1].GetName())
	require.Len(t, got.Ignores, 1, "named for gen-b alone")
	assert.Equal(t, "gen-b", got.Ignores[0].Name)
	assert.Equal(t, []string{"/spec/source/targetRevision"}, got.Ignores[0].JSONPointers)
}

func TestGenerateGoTemplateAndElementsYaml(t *testing.T) {
	set := appSetDoc(t, `
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: s, namespace: apps}
spec:
  goTemplate: true
  syncPolicy: {preserveResourcesOnDeletion: true}
  generators:
  - list:
      elements: [{env: dev, replicas: 1}]
      elementsYaml: |
        - {env: prod, replicas: 3}
  template:
    metadata: {name: 'llm-{{.env}}'}
    spec:
      project: '{{.env}}'
      source: {repoURL: https://git.example/p.git, path: 'overlays/{{.env}}'}
      destination: {server: https://kubernetes.default.svc}
`)
	got, err := Generate(set, nil, "argocd")
	require.NoError(t, err)
	var names, projects []string
	for _, app := range got.Applications {
		names = append(names, app.GetNamespace()+"/"+app.GetName())
		p, _, _ := unstructured.NestedString(app.Object, "spec", "project")
		projects = append(projects, p)
		assert.Empty(t, app.GetFinalizers(), "preserveResourcesOnDeletion: no finalizer added")
	}
	assert.Equal(t, []string{"apps/llm-dev", "apps/llm-prod"}, names, "in the set's namespace")
	assert.Equal(t, []string{"dev", "prod"}, projects)
}

func TestGenerateSaysWhatItCannotRender(t *testing.T) {
	for name, gens := range map[string]string{
		"clusters generator":     `[{clusters: {}}]`,
		"matrix of list and git": `[{matrix: {generators: [{list: {elements: [{a: b}]}}, {git: {repoURL: x, revision: main, directories: [{path: '*'}]}}]}}]`,
		"list with a selector":   `[{list: {elements: [{a: b}]}, selector: {matchLabels: {a: b}}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			set := appSetDoc(t, `
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: s, namespace: argocd}
spec:
  generators: `+gens+`
  template:
    metadata: {name: x}
    spec: {project: default, destination: {server: https://kubernetes.default.svc}}
`)
			got, err := Generate(set, nil, "argocd")
			require.NoError(t, err)
			assert.NotEmpty(t, got.Unsupported)
			assert.Empty(t, got.Applications)
		})
	}
}

// TestGeneratedExemptionsNameOnlyTheirApplications: the set's exemptions, as the normalizer the
// audit applies to its Applications, remove the fields they name from the Application they name,
// in the set's namespace, and from nothing else.
func TestGeneratedExemptionsNameOnlyTheirApplications(t *testing.T) {
	set := appSetDoc(t, `
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: s}
spec:
  generators: [{list: {elements: [{name: a}, {name: b}]}}]
  template:
    metadata: {name: 'gen-{{name}}'}
    spec: {project: default, source: {repoURL: r, path: p, targetRevision: main}, destination: {server: https://kubernetes.default.svc}}
  ignoreApplicationDifferences:
  - {name: gen-b, jsonPointers: [/spec/source/targetRevision]}
  preservedFields: {annotations: [team.example/owner]}
`)
	gen, err := Generate(set, nil, "apps")
	require.NoError(t, err)
	n, err := IgnoreNormalizer(gen.Ignores)
	require.NoError(t, err)
	app := func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{"team.example/owner": "x"}},
			"spec":     map[string]any{"source": map[string]any{"targetRevision": "HEAD"}}}}
	}
	for _, tc := range []struct {
		ns, name             string
		revision, annotation bool // still there after normalization
	}{
		{"apps", "gen-b", false, false},
		{"apps", "gen-a", true, false},
		{"team-a", "gen-b", true, true}, // another namespace: not the set's Application
		{"apps", "other", true, true},
	} {
		d, _, err := n.Normalize(app(tc.ns, tc.name), app(tc.ns, tc.name), nil)
		require.NoError(t, err)
		_, rev, _ := unstructured.NestedString(d.Object, "spec", "source", "targetRevision")
		_, ann, _ := unstructured.NestedString(d.Object, "metadata", "annotations", "team.example/owner")
		assert.Equal(t, tc.revision, rev, "%s/%s targetRevision", tc.ns, tc.name)
		assert.Equal(t, tc.annotation, ann, "%s/%s preserved annotation", tc.ns, tc.name)
	}
}

func TestGenerateFromTheLiveSetWithGitsExemptions(t *testing.T) {
	doc := func(elements, ignore string) *unstructured.Unstructured {
		return appSetDoc(t, `
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: s, namespace: argocd}
spec:
  generators: [{list: {elements: `+elements+`}}]
  template:
    metadata: {name: 'gen-{{name}}'}
    spec: {project: default, destination: {server: https://kubernetes.default.svc}}
  ignoreApplicationDifferences: `+ignore+`
`)
	}
	git := doc(`[{name: a}]`, `[]`)
	live := doc(`[{name: a}, {name: extra}]`, `[{jsonPointers: [/spec]}]`) // edited by hand
	gen, err := Generate(git, live, "argocd")
	require.NoError(t, err)
	var names []string
	for _, a := range gen.Applications {
		names = append(names, a.GetName())
	}
	assert.Equal(t, []string{"gen-a", "gen-extra"}, names, "what the controller reads: the live set")
	assert.Empty(t, gen.Ignores, "an exemption only the live set has excuses nothing")

	failing := live.DeepCopy()
	require.NoError(t, unstructured.SetNestedSlice(failing.Object, []any{map[string]any{"type": "ErrorOccurred", "status": "True", "message": "boom", "reason": "x"}}, "status", "conditions"))
	gen, err = Generate(git, failing, "argocd")
	require.NoError(t, err)
	assert.Contains(t, gen.Unsupported, "boom")
}
