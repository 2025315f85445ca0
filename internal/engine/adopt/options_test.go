package adopt

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

const multiApp = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: guestbook
  namespace: argocd
spec:
  project: default
  sources:
    - repoURL: https://git.example.com/platform.git
      targetRevision: main
      path: charts/guestbook
      helm:
        valueFiles: [$settings/envs/prod/guestbook.yaml]
    - repoURL: https://git.example.com/platform.git
      targetRevision: main
      ref: settings
  destination:
    server: https://kubernetes.default.svc
    namespace: guestbook
`

const kustApp = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: kust
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://git.example.com/platform.git
    targetRevision: main
    path: extras-kust
    kustomize:
      namePrefix: k-
      images:
        - registry.example.com/llm/worker:0.2 # pinned
      replicas:
        - name: worker
          count: 3
      commonLabels:
        tier: gold
  destination:
    server: https://kubernetes.default.svc
    namespace: llm
`

var kustFiles = map[string]string{
	"apps/prod/kust.yaml":            kustApp,
	"extras-kust/kustomization.yaml": "resources: [worker.yaml]\n",
	"extras-kust/worker.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
spec:
  replicas: 1
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers: [{name: worker, image: registry.example.com/llm/worker:0.1}]
`,
}

// worker is the kustomization's Deployment, with fields changed by hand.
func worker(fields ...drift.Field) drift.Object {
	return drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm", Name: "k-worker", Status: drift.Modified,
		Application: "kust", Source: "extras-kust with kust's kustomize options", AppSource: "apps/prod", Fields: fields}
}

var (
	workerImage = notifytest.At(drift.Field{Desired: "registry.example.com/llm/worker:0.2", Live: "registry.example.com/llm/worker:0.3", Change: drift.Changed},
		"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "worker"), "image")
	workerReplicas = notifytest.At(drift.Field{Desired: int64(3), Live: int64(5), Change: drift.Changed}, "spec", "replicas")
	workerTier     = notifytest.At(drift.Field{Desired: "gold", Live: "silver", Change: drift.Changed}, "metadata", "labels", "tier")
)

// TestAdoptIntoApplicationOptions: the value a drifted field comes from is written where the
// Application sets it: a value file of a ref source of a multi-source Application, the image
// tag in its kustomize.images and the count in its kustomize.replicas, a chart's image tag
// (part of the image), the manifest of a root applied by hand. The patch applies and the
// Application renders the live values from the patched tree.
func TestAdoptIntoApplicationOptions(t *testing.T) {
	apiChart := map[string]string{
		"charts/api/Chart.yaml":  "apiVersion: v2\nname: api\nversion: 0.1.0\n",
		"charts/api/values.yaml": "image:\n  repository: registry.example.com/llm/api\n  tag: \"1.0\"\n",
		"charts/api/templates/api.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  selector: {matchLabels: {app: api}}\n" +
			"  template:\n    metadata: {labels: {app: api}}\n    spec:\n      containers: [{name: api, image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"}]\n",
		"apps/prod/api.yaml": strings.NewReplacer("charts/guestbook", "charts/api", "name: guestbook\n", "name: api\n").Replace(guestbookApp("")),
	}
	api := drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: "api", Status: drift.Modified,
		Application: "api", Source: "Helm chart charts/api", AppSource: "apps/prod",
		Fields: []drift.Field{notifytest.At(drift.Field{Desired: "registry.example.com/llm/api:1.0", Live: "registry.example.com/llm/api:1.1", Change: drift.Changed},
			"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "api"), "image")}}
	multi := guestbookUI(4)
	multi.Source = "sources of guestbook"
	root := guestbookUI(2)
	root.AppSource = "clusters/prod/guestbook.yaml"
	tests := []struct {
		name   string
		files  map[string]string
		obj    drift.Object
		fields int
		notes  []string
		golden string
	}{
		{name: "ref source's value file", files: map[string]string{"apps/prod/guestbook.yaml": multiApp, "envs/prod/guestbook.yaml": "replicas: 1 # prod\n"},
			obj: multi, fields: 1, golden: "sources-ref-value-file.golden.diff"},
		{name: "kustomize images and replicas", files: kustFiles, obj: worker(workerImage, workerReplicas, workerTier), fields: 2, golden: "kustomize-options.golden.diff",
			notes: []string{"Deployment llm/k-worker .metadata.labels.tier: its Application kust renders extras-kust with kust's kustomize options: no patch is written for it; change it there; " +
				"only an image kustomize.images sets and a count kustomize.replicas sets are adopted into its kustomize options"}},
		{name: "image tag", files: apiChart, obj: api, fields: 1, golden: "helm-image-tag.golden.diff"},
		{name: "root applied by hand", files: map[string]string{"clusters/prod/guestbook.yaml": guestbookApp("")}, obj: root, fields: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := guestbook(t)
			maps.Copy(files, tt.files)
			dir := gitRepo(t, files)
			a := groupIn(t, dir, tt.obj)
			assert.Equal(t, tt.notes, a.Notes)
			assert.Equal(t, tt.fields, a.Fields)
			if tt.golden != "" {
				notifytest.Golden(t, tt.golden, []byte(a.Diff))
			}
			applyPatch(t, dir, a.Diff)
			o := tt.obj
			o.Fields = nil
			for _, f := range tt.obj.Fields {
				if f.Path != workerTier.Path {
					o.Fields = append(o.Fields, f)
				}
			}
			if o.AppSource == root.AppSource { // assertRenders reads apps/
				require.NoError(t, os.MkdirAll(filepath.Join(dir, "apps"), 0o755))
				require.NoError(t, os.Rename(filepath.Join(dir, o.AppSource), filepath.Join(dir, "apps/guestbook.yaml")))
			}
			assertRenders(t, dir, o)
		})
	}
}

// TestAdoptIntoApplicationOptionsNotes: nothing is written when the Application's manifest is
// not a plain file (a kustomization patches it, an ApplicationSet generates it), and the note
// says where to set the value.
func TestAdoptIntoApplicationOptionsNotes(t *testing.T) {
	const why = "Deployment guestbook/guestbook-ui: its Application guestbook renders the Helm chart charts/guestbook: set the value in its values (the Application's valuesObject or a values file); "
	generated := guestbookUI(3)
	generated.AppSource = drift.GeneratedSource + "guestbooks"
	options := guestbookUI(3)
	options.AppSource = "apps/prod with root's kustomize options"
	tests := []struct {
		name  string
		files map[string]string
		obj   drift.Object
		note  string
	}{
		{name: "patched by a kustomization", obj: guestbookUI(3), files: map[string]string{
			"apps/prod/guestbook.yaml": guestbookApp(""),
			"apps/prod/kustomization.yaml": "resources: [guestbook.yaml]\npatches:\n  - target: {kind: Application}\n" +
				"    patch: '[{\"op\": \"add\", \"path\": \"/spec/source/helm/valuesObject\", \"value\": {\"replicas\": 1}}]'\n"},
			note: why + "no file declares its Application guestbook as apps/prod renders it (a kustomization's patch or generator makes it): set the value where apps/prod sets it"},
		{name: "generated", obj: generated, files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("")},
			note: why + "its Application guestbook is generated from the template of ApplicationSet guestbooks: set the value in that template"},
		{name: "declared by a source with options", obj: options, files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("")},
			note: why + "its Application guestbook is declared by what apps/prod with root's kustomize options renders, not a plain file: set the value there"},
		{name: "not known", obj: drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: "guestbook-ui", Status: drift.Modified,
			Application: "guestbook", Source: "Helm chart charts/guestbook", Fields: guestbookUI(3).Fields}, files: map[string]string{"apps/prod/guestbook.yaml": guestbookApp("")},
			note: why + "the file that declares its Application guestbook is not known: set the value in that Application's options"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := guestbook(t)
			maps.Copy(files, tt.files)
			a := groupIn(t, gitRepo(t, files), tt.obj)
			assert.Empty(t, a.Diff)
			assert.Equal(t, []string{tt.note}, a.Notes)
		})
	}
}
