package adopt

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
)

// TestAdoptHelmValueNotIntoSharedFile: a value set by a value file another Application reads
// too (the chart's own values.yaml listed in valueFiles, a file two Applications list) is
// written into the Application's own valuesObject, which Argo CD merges over every value file;
// the shared file and the other Application stay as they are.
func TestAdoptHelmValueNotIntoSharedFile(t *testing.T) {
	staging := strings.NewReplacer("name: guestbook\n", "name: guestbook-staging\n", "namespace: guestbook\n", "namespace: guestbook-staging\n")
	tests := []struct {
		name   string
		files  map[string]string
		golden string
		where  string // the file left alone
	}{
		{name: "the chart's values.yaml listed", golden: "helm-chart-values-listed.golden.diff", where: "charts/guestbook/values.yaml",
			files: map[string]string{
				"apps/prod/guestbook.yaml":          guestbookApp("      valueFiles: [values.yaml, values-prod.yaml]\n"),
				"charts/guestbook/values-prod.yaml": "# prod\nother: x\n"}},
		{name: "a file two Applications list", golden: "helm-shared-value-file.golden.diff", where: "values/common.yaml",
			files: map[string]string{
				"apps/prod/guestbook.yaml":    guestbookApp("      valueFiles: [/values/common.yaml]\n"),
				"apps/staging/guestbook.yaml": staging.Replace(guestbookApp("      valueFiles:\n        - ../../values/common.yaml\n")),
				"values/common.yaml":          "# every env\nreplicas: 1\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := guestbook(t)
			maps.Copy(files, tt.files)
			dir := gitRepo(t, files)
			a := groupIn(t, dir, guestbookUI(3))
			assert.Empty(t, a.Notes)
			assert.Equal(t, 1, a.Fields)
			notifytest.Golden(t, tt.golden, []byte(a.Diff))
			assert.NotContains(t, a.Diff, "b/"+tt.where)
			assert.NotContains(t, a.Diff, "apps/staging")
			assert.Contains(t, a.Diff, "\n+      valuesObject:\n+        replicas: 3\n")
			applyPatch(t, dir, a.Diff)
			assertRenders(t, dir, guestbookUI(3))
		})
	}
	t.Run("a file this Application alone lists", func(t *testing.T) {
		files := guestbook(t)
		maps.Copy(files, map[string]string{
			"apps/prod/guestbook.yaml":    guestbookApp("      valueFiles: [/values/prod.yaml]\n"),
			"apps/staging/guestbook.yaml": staging.Replace(guestbookApp("      valueFiles: [/values/staging.yaml]\n")),
			"values/prod.yaml":            "replicas: 1\n",
			"values/staging.yaml":         "replicas: 1\n"})
		dir := gitRepo(t, files)
		a := groupIn(t, dir, guestbookUI(3))
		assert.Empty(t, a.Notes)
		assert.Contains(t, a.Diff, "+++ b/values/prod.yaml\n")
		assert.Contains(t, a.Diff, "\n+replicas: 3\n")
		applyPatch(t, dir, a.Diff)
		assertRenders(t, dir, guestbookUI(3))
	})
}

// TestAdoptHelmValueNotIntoSharedManifest: an Application declared in a file that two
// kustomizations include, or that a kustomization patches, is not edited: the note names the
// file and why.
func TestAdoptHelmValueNotIntoSharedManifest(t *testing.T) {
	const patch = `patches:
  - target: {kind: Application, name: guestbook}
    patch: |
      - op: replace
        path: /spec/destination/namespace
        value: guestbook-%s
`
	tests := []struct {
		name  string
		files map[string]string
		note  string
	}{
		{name: "a base two patched kustomizations include",
			files: map[string]string{
				"apps/prod/kustomization.yaml":    "resources: [../common]\n" + strings.ReplaceAll(patch, "%s", "prod"),
				"apps/staging/kustomization.yaml": "resources: [../common]\n" + strings.ReplaceAll(patch, "%s", "staging"),
				"apps/common/kustomization.yaml":  "resources: [guestbook.yaml]\n",
				"apps/common/guestbook.yaml":      guestbookApp("")},
			note: "apps/common/guestbook.yaml declares its Application, and the kustomization in apps/prod patches it (patches[0])"},
		{name: "a base two kustomizations include",
			files: map[string]string{
				"apps/prod/kustomization.yaml":    "resources: [../common]\n",
				"apps/staging/kustomization.yaml": "resources: [../common]\n",
				"apps/common/kustomization.yaml":  "resources: [guestbook.yaml]\n",
				"apps/common/guestbook.yaml":      guestbookApp("")},
			note: "apps/common/guestbook.yaml declares its Application and is included by apps/prod, apps/staging"},
		{name: "a strategic merge patch",
			files: map[string]string{
				"apps/prod/kustomization.yaml":   "resources: [../common]\npatches:\n  - path: dest.yaml\n",
				"apps/prod/dest.yaml":            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: guestbook, namespace: argocd}\nspec: {destination: {namespace: guestbook}}\n",
				"apps/common/kustomization.yaml": "resources: [guestbook.yaml]\n",
				"apps/common/guestbook.yaml":     guestbookApp("")},
			note: "the kustomization in apps/prod patches it (patches[0])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := guestbook(t)
			maps.Copy(files, tt.files)
			dir := gitRepo(t, files)
			a := groupIn(t, dir, guestbookUI(3))
			assert.Empty(t, a.Diff)
			assert.Zero(t, a.Fields)
			require.Len(t, a.Notes, 1)
			assert.Contains(t, a.Notes[0], tt.note)
		})
	}
}

// TestAdoptHelmValueIntoJSON: an Application declared in a .json file stays valid JSON, with its
// keys in order and its indentation: a value replaced in place, a valuesObject made.
func TestAdoptHelmValueIntoJSON(t *testing.T) {
	app := func(helm string) string {
		return `{
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Application",
    "metadata": {"name": "guestbook", "namespace": "argocd"},
    "spec": {
        "project": "default",
        "source": {
            "repoURL": "https://git.example.com/platform.git",
            "path": "charts/guestbook",
            "helm": {"releaseName": "guestbook"` + helm + `}
        },
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "guestbook"}
    }
}
`
	}
	tests := []struct {
		name, helm, golden string
	}{
		{"valuesObject made", "", "helm-json-valuesobject-made.golden.diff"},
		{"valuesObject", `, "valuesObject": {"replicas": 1}`, "helm-json-valuesobject.golden.diff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := guestbook(t)
			files["apps/prod/guestbook.json"] = app(tt.helm)
			dir := gitRepo(t, files)
			a := groupIn(t, dir, guestbookUI(3))
			assert.Empty(t, a.Notes)
			assert.Equal(t, 1, a.Fields)
			notifytest.Golden(t, tt.golden, []byte(a.Diff))
			applyPatch(t, dir, a.Diff)
			data, err := os.ReadFile(filepath.Join(dir, "apps/prod/guestbook.json"))
			require.NoError(t, err)
			var v map[string]any
			require.NoError(t, json.Unmarshal(data, &v), string(data))
			assert.True(t, strings.HasPrefix(string(data), "{\n    \"apiVersion\""), string(data))
			assertRenders(t, dir, guestbookUI(3))
		})
	}
}

// TestAdoptHelmValueBesideValuesString: a valuesObject that is there but null leaves the
// values string in force; the value goes into that string, not into a valuesObject made
// non-null (which would disable the string).
func TestAdoptHelmValueBesideValuesString(t *testing.T) {
	files := guestbook(t)
	files["apps/prod/guestbook.yaml"] = guestbookApp("      valuesObject:\n      values: |\n        other: x\n")
	dir := gitRepo(t, files)
	a := groupIn(t, dir, guestbookUI(3))
	assert.Empty(t, a.Notes)
	assert.Equal(t, 1, a.Fields)
	assert.Contains(t, a.Diff, "\n         other: x\n+        replicas: 3\n")
	assert.NotContains(t, a.Diff, "+      valuesObject")
	applyPatch(t, dir, a.Diff)
	assertRenders(t, dir, guestbookUI(3))
}

// TestYAMLEditCRLF: a file of CRLF lines keeps them, on a replaced value and on inserted lines.
func TestYAMLEditCRLF(t *testing.T) {
	in := "# values\r\nreplicas: 1 # one\r\nimage:\r\n  tag: \"1.0\"\r\n"
	e := &yamlEdit{name: "values.yaml", data: []byte(in)}
	require.NoError(t, e.set(0, []step{"replicas"}, 3))
	require.NoError(t, e.set(0, []step{"image", "tag"}, "2.0"))
	require.NoError(t, e.set(0, []step{"resources", "limits"}, map[string]any{"cpu": "1"}))
	assert.Equal(t, "# values\r\nreplicas: 3 # one\r\nimage:\r\n  tag: \"2.0\"\r\nresources:\r\n  limits:\r\n    cpu: \"1\"\r\n", string(e.data))

	lines := []string{"a: 1\r\n", "b: x\r\n"}
	n := &yamlEdit{name: "mixed.yaml", data: []byte(strings.Join(lines, "") + "c: 2\n")}
	require.NoError(t, n.set(0, []step{"b"}, "z"))
	assert.Equal(t, "a: 1\r\nb: z\r\nc: 2\n", string(n.data))
}

// TestAdoptHelmValueRandomChart: a chart that renders differently each time (randAlphaNum) gets
// a note that says so, not that no value sets the field alone.
func TestAdoptHelmValueRandomChart(t *testing.T) {
	files := guestbook(t)
	files["apps/prod/guestbook.yaml"] = guestbookApp("")
	files["charts/guestbook/templates/secret.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: token}\ndata: {token: {{ randAlphaNum 16 | quote }}}\n"
	dir := gitRepo(t, files)
	a := groupIn(t, dir, guestbookUI(3))
	assert.Empty(t, a.Diff)
	require.Len(t, a.Notes, 1)
	assert.Contains(t, a.Notes[0], "its chart renders differently each time")
	assert.NotContains(t, a.Notes[0], "sets it alone")
}
