package adopt

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// guestbook is Argo CD's own e2e chart helm-guestbook, at charts/guestbook: a Deployment whose
// replicas are .Values.replicas (1) and a Service.
func guestbook(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v3").Output()
	require.NoError(t, err, "the argo-cd module")
	root := filepath.Join(strings.TrimSpace(string(out)), "test/e2e/testdata/helm-guestbook")
	files := map[string]string{}
	require.NoError(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files["charts/guestbook/"+filepath.ToSlash(rel)] = string(data)
		return err
	}))
	return files
}

// guestbookApp is the Application of the guestbook chart, with helm options (YAML lines under
// helm:, indented by six spaces).
func guestbookApp(helm string) string {
	return `# The guestbook, from its chart in this repository.
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: guestbook
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://git.example.com/platform.git
    targetRevision: main
    path: charts/guestbook
    helm:
      releaseName: guestbook # as the cluster knows it
` + helm + `  destination:
    server: https://kubernetes.default.svc
    namespace: guestbook
`
}

// guestbookUI is the guestbook's Deployment with its replicas changed by hand from 1 to live.
func guestbookUI(live int64) drift.Object {
	return drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: "guestbook-ui", Status: drift.Modified,
		Application: "guestbook", Source: "Helm chart charts/guestbook", AppSource: "apps/prod",
		Fields: []drift.Field{notifytest.At(drift.Field{Desired: int64(1), Live: live, Change: drift.Changed}, "spec", "replicas")}}
}

// TestAdoptHelmValue: a replica count changed by hand on a Deployment of Argo CD's guestbook
// chart is adopted into the Helm value it comes from, where the Application sets it: its
// valuesObject (made when it has neither values nor valuesObject), its values, a value file it
// names, a parameter. The diff applies with git apply, and the chart rendered from the patched
// tree gives the live count.
func TestAdoptHelmValue(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		golden string
		want   string // a line of the changed file
	}{
		{name: "valuesObject made", golden: "helm-valuesobject-made.golden.diff", want: "        replicas: 3",
			files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("")}},
		{name: "valuesObject", golden: "helm-valuesobject.golden.diff", want: "        replicas: 3 # by hand",
			files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("      valuesObject:\n        replicas: 1 # by hand\n        extra: {a: 1}\n")}},
		{name: "values string", golden: "helm-values.golden.diff", want: "        replicas: 3",
			files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("      values: |\n        # the count\n        replicas: 1\n")}},
		{name: "values string without the key", golden: "helm-values-new-key.golden.diff", want: "        replicas: 3",
			files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("      values: |-\n        other: x\n")}},
		{name: "value file", golden: "helm-value-file.golden.diff", want: "replicas: 3",
			files: map[string]string{
				"apps/prod/guestbook.yaml":          guestbookApp("      valueFiles: [values-prod.yaml]\n      valuesObject: {other: x}\n"),
				"charts/guestbook/values-prod.yaml": "# prod\nreplicas: 1\n"}},
		{name: "parameter wins over values", golden: "helm-parameter.golden.diff", want: `          value: "3"`,
			files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("      valuesObject:\n        replicas: 2\n      parameters:\n        - name: replicas\n          value: \"1\"\n")}},
		{name: "in a kustomization of Applications", golden: "helm-kustomization.golden.diff", want: "        replicas: 3",
			files: map[string]string{
				"apps/prod/kustomization.yaml":   "resources: [../common]\n",
				"apps/common/kustomization.yaml": "resources: [guestbook.yaml]\n",
				"apps/common/guestbook.yaml":     guestbookApp("")}},
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
			applyPatch(t, dir, a.Diff)
			assert.Contains(t, a.Diff, "\n+"+tt.want+"\n")
			assertRenders(t, dir, guestbookUI(3))
		})
	}
}

// TestAdoptHelmValueNotWritten: nothing is written when no one chart value sets the field
// alone, and the note says why: a value used in two places (one key, two fields: changing it
// would change the Service too), two values that each give the field (both named). The value
// of two places is written when both changed alike.
func TestAdoptHelmValueNotWritten(t *testing.T) {
	tier := func(kind, live string) drift.Object {
		return drift.Object{APIVersion: map[string]string{"Deployment": "apps/v1", "Service": "v1"}[kind], Kind: kind, Namespace: "guestbook", Name: "web", Status: drift.Modified,
			Application: "guestbook", Source: "Helm chart charts/web", AppSource: "apps/prod",
			Fields: []drift.Field{notifytest.At(drift.Field{Desired: "gold", Live: live, Change: drift.Changed}, "metadata", "labels", "tier")}}
	}
	replicas := func(live int64) drift.Object {
		return drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: "web", Status: drift.Modified,
			Application: "guestbook", Source: "Helm chart charts/web", AppSource: "apps/prod",
			Fields: []drift.Field{notifytest.At(drift.Field{Desired: int64(2), Live: live, Change: drift.Changed}, "spec", "replicas")}}
	}
	app := strings.ReplaceAll(guestbookApp(""), "charts/guestbook", "charts/web")
	chart := map[string]string{
		"charts/web/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/values.yaml": "tier: gold\nreplicas: 2\nminReplicas: 2\n",
		"charts/web/templates/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {tier: {{ .Values.tier }}}}
spec:
  replicas: {{ max .Values.minReplicas .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: web:1
---
apiVersion: v1
kind: Service
metadata: {name: web, labels: {tier: {{ .Values.tier }}}}
spec:
  selector: {app: web}
  ports: [{port: 80}]
`,
		"apps/prod/guestbook.yaml": app,
	}
	const none = "Deployment guestbook/web %s: its Application guestbook renders the Helm chart charts/web: set the value in its values (the Application's valuesObject or a values file); %s"
	tests := []struct {
		name string
		obj  drift.Object
		note string
	}{
		{"one value, two fields", tier("Deployment", "silver"), fmt.Sprintf(none, ".metadata.labels.tier", "no value of its options sets it alone")},
		{"two values, one field", replicas(4), fmt.Sprintf(none, ".spec.replicas", "each of these values sets it, none is written: "+
			"minReplicas (helm values of the Application in apps/prod/guestbook.yaml), replicas (helm values of the Application in apps/prod/guestbook.yaml)")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := gitRepo(t, chart)
			a := groupIn(t, dir, tt.obj)
			assert.Empty(t, a.Diff)
			assert.Zero(t, a.Fields)
			assert.Equal(t, []string{tt.note}, a.Notes)
		})
	}
	t.Run("one value, two fields, both changed", func(t *testing.T) {
		dir := gitRepo(t, chart)
		a := groupIn(t, dir, tier("Deployment", "silver"), tier("Service", "silver"))
		assert.Empty(t, a.Notes)
		assert.Equal(t, 2, a.Fields)
		assert.Contains(t, a.Diff, "\n+      valuesObject:\n+        tier: silver\n")
		applyPatch(t, dir, a.Diff)
		assertRenders(t, dir, tier("Service", "silver"))
	})
}

// groupIn adopts objs into the repository at dir, at its head, with its trees.
func groupIn(t *testing.T, dir string, objs ...drift.Object) *Adoption {
	t.Helper()
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	head := git(t, dir, "rev-parse", "HEAD")
	a, err := GroupIn("prod", head, Repo{ReadAt: repo.ReadFile, Tree: repo.Snapshot}, objs...)
	require.NoError(t, err)
	return a
}

// assertRenders renders o's Application from the work tree at dir as Argo CD would (its
// manifest read from the file that declares it, its chart with its helm options, a value file of
// a ref source read by hand) and checks each drifted field of o is its live value there.
func assertRenders(t *testing.T, dir string, o drift.Object) {
	t.Helper()
	var app *argocd.App
	err := filepath.Walk(filepath.Join(dir, "apps"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || path.Ext(p) != ".yaml" && path.Ext(p) != ".json" {
			return err
		}
		data, err := os.ReadFile(p)
		for _, doc := range strings.Split(string(data), "\n---\n") {
			u := &unstructured.Unstructured{}
			if yaml.Unmarshal([]byte(doc), &u.Object) == nil && u.GetKind() == "Application" && u.GetName() == o.Application {
				app, err = argocd.FromUnstructured(u)
			}
		}
		return err
	})
	require.NoError(t, err)
	require.NotNil(t, app, "Application %s", o.Application)
	src, err := render.FromDir(dir)
	require.NoError(t, err)
	var v render.Variant
	chart := app.Path
	switch {
	case len(app.Sources) > 0:
		for j, s := range app.Sources {
			if _, err := os.Stat(filepath.Join(dir, s.Path, "Chart.yaml")); s.Path == "" || err != nil {
				continue
			}
			chart, v.Helm = s.Path, app.SourceHelmOptions(j, "", argocd.Cluster{})
			for _, f := range v.Helm.ValueFiles {
				if _, rest, ok := strings.Cut(f, "/"); ok && strings.HasPrefix(f, "$") {
					data, err := os.ReadFile(filepath.Join(dir, rest))
					require.NoError(t, err)
					v.Helm.RefValues = map[string]string{f: string(data)}
				}
			}
		}
	case strings.HasPrefix(o.Source, "Helm chart "):
		v.Helm = app.HelmOptions("", argocd.Cluster{})
	default:
		v.Kustomize, err = app.KustomizeOptions("")
		require.NoError(t, err)
	}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: render.AppTarget(chart), Variant: v})
	require.NoError(t, err)
	obj := renderedObject(res, o)
	require.NotNil(t, obj, "%s %s rendered", o.Kind, o.Name)
	for _, f := range o.Fields {
		got, ok := valueAt(obj, f)
		assert.True(t, ok, f.Path)
		assert.True(t, equalValue(f.Live, got), "%s rendered %v, live %v", f.Path, got, f.Live)
	}
}
