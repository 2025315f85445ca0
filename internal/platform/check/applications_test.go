package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// A Helm chart in the repository that an Application of apps/prod syncs: the pull request's
// check renders it with the Application's helm options and runs the rules on its objects.
const chartSource = `  source:
    repoURL: https://git.example.com/platform/llm-gitops.git
    targetRevision: main
    path: charts/api
    helm:
      valueFiles: [values-prod.yaml]
      parameters:
        - name: image.tag
          value: "1.0.0"
`

const chartApp = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: api-chart
  namespace: argocd
spec:
  project: llm-prod
` + chartSource + `  destination:
    server: https://kubernetes.default.svc
    namespace: llm-api
`

var chartFiles = map[string]string{
	// helm create's test hook (an unpinned image): Argo CD never keeps it applied, so no rule sees it
	"charts/api/templates/tests/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-test\n  annotations: {helm.sh/hook: test}\nspec:\n  containers: [{name: wget, image: busybox}]\n",
	"charts/api/Chart.yaml":                "apiVersion: v2\nname: api\nversion: 0.1.0\n",
	"charts/api/values.yaml":               "replicas: 1\nimage:\n  tag: \"0.9.0\"\n",
	"charts/api/values-prod.yaml":          "replicas: 2\n",
	"charts/api/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas | required "replicas is required" }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: {{ .Release.Name }}}}}
        - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: {{ .Release.Name }}}}}
      containers:
        - name: api
          image: registry.example.com/llm/api:{{ .Values.image.tag }}
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`,
}

func TestCheckRendersHelmApplications(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	writeFiles(t, dir, chartFiles)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apps/prod/api-chart.yaml"), []byte(chartApp), 0o644))
	edit("apps/prod/kustomization.yaml", "  - llm-prod.yaml\n", "  - llm-prod.yaml\n  - api-chart.yaml\n")
	edit("apps/prod/kustomization.yaml", "      - select: {group: argoproj.io, kind: Application, name: llm-prod}\n",
		"      - select: {group: argoproj.io, kind: Application, name: api-chart}\n        fieldPaths: [spec.source.targetRevision]\n      - select: {group: argoproj.io, kind: Application, name: llm-prod}\n")
	commit("a chart Application")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)

	res, err := Run(repo, "HEAD~2", "HEAD")
	require.NoError(t, err)
	prod := res.Envs[0]
	require.Equal(t, "prod", prod.Env)
	assert.True(t, res.Passed, "violations: %+v", prod.Violations)
	assert.Contains(t, prod.Applications, AppRender{Name: "api-chart", Path: "charts/api", Objects: 1})
	assert.Contains(t, changeNames(prod.Changes), "Deployment llm-api/api-chart added", "the chart's objects are in the rendered changes")

	for _, tc := range []struct {
		name, file, old, new, rule, message string
	}{
		{"the Application's parameter unpins the image", "apps/prod/api-chart.yaml", `value: "1.0.0"`, `value: latest`,
			"llm-images-pinned", "registry.example.com/llm/api:latest"},
		{"a template that fails", "charts/api/values-prod.yaml", "replicas: 2", "replicas: null",
			"application-renders", "replicas is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edit(tc.file, tc.old, tc.new)
			commit(tc.name)
			res, err := Run(repo, "HEAD~2", "HEAD")
			require.NoError(t, err)
			prod := res.Envs[0]
			assert.False(t, res.Passed)
			var found []string
			for _, v := range prod.Violations {
				found = append(found, v.Rule+": "+v.Object+": "+v.Message)
				if v.Rule == tc.rule {
					assert.Contains(t, v.Message, tc.message)
				}
			}
			assert.Contains(t, strings.Join(found, "\n"), tc.rule)
			edit(tc.file, tc.new, tc.old)
			commit("undo " + tc.name)
		})
	}
	t.Run("a dependency Argo CD would fetch is a warning", func(t *testing.T) {
		edit("charts/api/Chart.yaml", "version: 0.1.0\n", "version: 0.1.0\ndependencies: [{name: redis, version: 1.0.0, repository: https://charts.example.com}]\n")
		commit("a chart dependency")
		res, err := Run(repo, "HEAD~2", "HEAD")
		require.NoError(t, err)
		prod := res.Envs[0]
		assert.True(t, res.Passed, "violations: %+v", prod.Violations)
		assert.Contains(t, res.Paths, "charts/api/Chart.yaml", "the files the change touches")
		assert.NotContains(t, res.Paths, "charts/api/values.yaml", "a file the change leaves alone")
		var warned bool
		for _, w := range prod.Warnings { // at risk: check lists it though the change leaves it alone
			warned = warned || w.Rule == "application-renders" && strings.Contains(w.Message, "dependencies redis") && w.Risk != ""
		}
		assert.True(t, warned, "warnings: %+v", prod.Warnings)
	})
}

// writeFiles writes files (path from dir → content) into the work tree at dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
}

func changeNames(cs []Change) []string {
	var out []string
	for _, c := range cs {
		ns := ""
		if c.Namespace != "" {
			ns = c.Namespace + "/"
		}
		out = append(out, c.Kind+" "+ns+c.Name+" "+c.Change)
	}
	return out
}

// A multi-source Application: the chart with a value file from a ref source of the same
// repository; check renders it with that file.
func TestCheckRendersMultiSourceApplications(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	writeFiles(t, dir, chartFiles)
	writeFiles(t, dir, map[string]string{"settings/api.yaml": "image:\n  tag: latest\n"})
	app := strings.Replace(chartApp, chartSource, `  sources:
    - repoURL: https://git.example.com/platform/llm-gitops.git
      targetRevision: main
      path: charts/api
      helm:
        valueFiles: [values-prod.yaml, $settings/settings/api.yaml]
    - repoURL: https://git.example.com/platform/llm-gitops.git
      targetRevision: main
      ref: settings
`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apps/prod/api-chart.yaml"), []byte(app), 0o644))
	edit("apps/prod/kustomization.yaml", "  - llm-prod.yaml\n", "  - llm-prod.yaml\n  - api-chart.yaml\n")
	commit("a multi-source chart Application")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD~2", "HEAD")
	require.NoError(t, err)
	prod := res.Envs[0]
	assert.Contains(t, prod.Applications, AppRender{Name: "api-chart", Path: "charts/api", Objects: 1})
	var msgs []string
	for _, v := range prod.Violations {
		msgs = append(msgs, v.Rule+": "+v.Message)
	}
	assert.Contains(t, strings.Join(msgs, "\n"), "llm-images-pinned: images must be pinned by tag or digest (not :latest, not untagged): registry.example.com/llm/api:latest",
		"the ref source's value file set the tag")
}
