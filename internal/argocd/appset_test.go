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
