package adopt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// apiBase is a minimal base: one Deployment and one ConfigMap.
var apiBase = map[string]string{
	"base/api/kustomization.yaml": "resources:\n  - deployment.yaml\n  - configmap.yaml\n",
	"base/api/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: llm
  labels:
    app: api
    tier: backend
spec:
  replicas: 2
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      tolerations:
        - {key: gpu, operator: Exists}
      containers:
        - name: api
          image: registry.example.com/llm/rag-api:1.0.0
          env:
            - {name: LOG_LEVEL, value: info}
            - {name: FOO, value: "1"}
          ports:
            - {containerPort: 8080, protocol: TCP}
            - {containerPort: 9090, protocol: TCP}
          resources:
            limits: {cpu: "1", memory: 1Gi}
`,
	"base/api/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: api-config
  namespace: llm
data:
  mode: fast
  size: "3"
`,
}

var (
	container = []any{"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "api")}

	aReplicas = notifytest.At(drift.Field{Desired: int64(2), Live: int64(5), Change: drift.Changed}, "spec", "replicas")
	aImage    = notifytest.At(drift.Field{Desired: "registry.example.com/llm/rag-api:1.0.0", Live: "registry.example.com/llm/rag-api:1.1.0", Change: drift.Changed},
		append(container, "image")...)
	aLogLevel = notifytest.At(drift.Field{Desired: "info", Live: "debug", Change: drift.Changed},
		append(container, "env", fieldpath.KeyByFields("name", "LOG_LEVEL"), "value")...)
	aNoFoo = notifytest.At(drift.Field{Desired: map[string]any{"name": "FOO", "value": "1"}, Change: drift.Removed},
		append(container, "env", fieldpath.KeyByFields("name", "FOO"))...)
	aNoPort = notifytest.At(drift.Field{Desired: map[string]any{"containerPort": int64(9090), "protocol": "TCP"}, Change: drift.Removed},
		append(container, "ports", fieldpath.KeyByFields("containerPort", 9090, "protocol", "TCP"))...)
	aLimits = notifytest.At(drift.Field{Desired: map[string]any{"cpu": "1", "memory": "1Gi"}, Live: map[string]any{"cpu": "2"}, Change: drift.Changed},
		append(container, "resources", "limits")...)
	aNoTier  = notifytest.At(drift.Field{Desired: "backend", Change: drift.Removed}, "metadata", "labels", "tier")
	aTeam    = notifytest.At(drift.Field{Live: "search", Change: drift.Added}, "metadata", "labels", "team")
	aNote    = notifytest.At(drift.Field{Live: "ops <team> & co", Change: drift.Added}, "metadata", "annotations", "example.com/owner")
	aNoEnv   = notifytest.At(drift.Field{Desired: "dev", Change: drift.Removed}, "metadata", "labels", "platform.llm/env")
	aTolByIx = notifytest.At(drift.Field{Desired: map[string]any{"key": "gpu", "operator": "Exists"}, Change: drift.Removed}, "spec", "template", "spec", "tolerations", 0)
)

func configMap(fields ...drift.Field) drift.Object {
	return drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm", Name: "api-config", Status: drift.Modified, Fields: fields}
}

var aMode = notifytest.At(drift.Field{Desired: "fast", Live: "safe", Change: drift.Changed}, "data", "mode")

const devKust = `# dev
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base/api
patches:
  # capacity
  - path: capacity.yaml # limits
images:
  - name: registry.example.com/llm/rag-api
    newTag: 1.0.0
`

const capacity = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: llm\nspec:\n  replicas: 2\n"

// TestAdoptPatchApplies applies each adopt patch with the git CLI to a repository holding a
// minimal kustomize layout, renders the overlay and checks every adopted field is now the live
// value (or gone, for a removal).
func TestAdoptPatchApplies(t *testing.T) {
	tests := []struct {
		name    string
		overlay map[string]string // files of overlays/dev/
		objs    []drift.Object
		notes   int
		// wantKust is a line the kustomization holds afterwards.
		wantKust string
	}{
		{name: "block patches list", overlay: map[string]string{"kustomization.yaml": devKust, "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aReplicas, aLogLevel, aNote)}, wantKust: "  - path: adopt-deployment-api.yaml"},
		{name: "no patches list", overlay: map[string]string{"kustomization.yaml": "resources:\n  - ../../base/api\n"},
			objs: []drift.Object{notifytest.Deployment(aReplicas)}, wantKust: "patches:"},
		{name: "no newline at end of file", overlay: map[string]string{"kustomization.yaml": "resources:\n  - ../../base/api\npatches:\n  - path: capacity.yaml", "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aReplicas)}, wantKust: "  - path: adopt-deployment-api.yaml"},
		{name: "items in the first column", overlay: map[string]string{"kustomization.yaml": "resources:\n- ../../base/api\npatches:\n- path: capacity.yaml\n# the end\n", "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aReplicas)}, wantKust: "- path: adopt-deployment-api.yaml"},
		{name: "flow-style patches list", overlay: map[string]string{"kustomization.yaml": "resources: [../../base/api]\npatches: [{path: capacity.yaml, target: {kind: Deployment}}]\n", "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aReplicas)}, wantKust: "  - {path: capacity.yaml, target: {kind: Deployment}}"},
		{name: "empty flow-style patches list", overlay: map[string]string{"kustomization.yaml": "resources: [../../base/api]\npatches: []\n"},
			objs: []drift.Object{notifytest.Deployment(aReplicas)}, wantKust: "  - path: adopt-deployment-api.yaml"},
		{name: "patches key without a value", overlay: map[string]string{"kustomization.yaml": "patches:\nresources:\n  - ../../base/api\n"},
			objs: []drift.Object{notifytest.Deployment(aReplicas)}, wantKust: "  - path: adopt-deployment-api.yaml"},
		{name: "removed env var, port and label, changed map", overlay: map[string]string{"kustomization.yaml": devKust, "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aNoFoo, aNoPort, aNoTier, aLimits, aTeam)}, wantKust: "  - path: adopt-deployment-api.yaml"},
		{name: "two objects in one patch", overlay: map[string]string{"kustomization.yaml": devKust, "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aReplicas), configMap(aMode)}, wantKust: "  - path: adopt-configmap-api-config.yaml"},
		{name: "image named under images: goes after it", overlay: map[string]string{"kustomization.yaml": devKust, "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aImage)}, wantKust: "    path: adopt-deployment-api.yaml"},
		{name: "label set by labels: goes after it", overlay: map[string]string{
			"kustomization.yaml": "resources: [../../base/api]\nlabels:\n  - pairs: {platform.llm/env: dev}\n"},
			objs: []drift.Object{notifytest.Deployment(aNoEnv)}, wantKust: "    kind: PatchTransformer"},
		{name: "adopt file already there is merged into", overlay: map[string]string{
			"kustomization.yaml":         devKust + "transformers: []\n",
			"capacity.yaml":              capacity,
			"adopt-deployment-api.yaml":  "# kept\n" + capacity + "  template:\n    spec:\n      containers:\n        - name: api\n          env:\n            - {name: FOO, $patch: delete}\n",
			"adopt-configmap-other.yaml": "unrelated: true\n"},
			objs: []drift.Object{notifytest.Deployment(aLogLevel, aImage)}, wantKust: "    path: adopt-deployment-api.yaml"},
		{name: "a file of that name holding something else", overlay: map[string]string{
			"kustomization.yaml":        "resources: [../../base/api]\n",
			"adopt-deployment-api.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: other\n"},
			objs: []drift.Object{notifytest.Deployment(aReplicas)}, wantKust: "  - path: adopt-deployment-api-2.yaml"},
		{name: "kind without a schema: keyed list item is a note", overlay: map[string]string{
			"kustomization.yaml": "resources: [../../base/api, widget.yaml]\n",
			"widget.yaml":        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: llm}\nspec:\n  size: 1\n  items: [{name: a, v: 1}, {name: b, v: 2}]\n"},
			objs: []drift.Object{{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "llm", Name: "w", Status: drift.Modified, Fields: []drift.Field{
				notifytest.At(drift.Field{Desired: int64(1), Live: int64(2), Change: drift.Changed}, "spec", "size"),
				notifytest.At(drift.Field{Desired: int64(1), Live: int64(9), Change: drift.Changed}, "spec", "items", fieldpath.KeyByFields("name", "a"), "v"),
			}}}, notes: 1, wantKust: "  - path: adopt-widget-w.yaml"},
		{name: "item by index is a note", overlay: map[string]string{"kustomization.yaml": devKust, "capacity.yaml": capacity},
			objs: []drift.Object{notifytest.Deployment(aReplicas, aTolByIx)}, notes: 1, wantKust: "  - path: adopt-deployment-api.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range apiBase {
				files[k] = v
			}
			for k, v := range tt.overlay {
				files["overlays/dev/"+k] = v
			}
			dir := gitRepo(t, files)
			a, err := Patch("dev", readHead(t, dir), tt.objs...)
			require.NoError(t, err)
			require.Len(t, a.Notes, tt.notes, "notes: %v", a.Notes)
			applyPatch(t, dir, a.Diff)
			kust, err := os.ReadFile(filepath.Join(dir, "overlays/dev/kustomization.yaml"))
			require.NoError(t, err)
			assert.Contains(t, splitLines(string(kust)), tt.wantKust, "kustomization:\n%s\npatch:\n%s", kust, a.Diff)
			for _, o := range tt.objs {
				assertAdopted(t, dir, "dev", o, a)
			}
		})
	}
}

// TestAdoptPatchOnTheRepository adopts hand edits of the issue into a copy of the project's own
// base, components and overlays.
func TestAdoptPatchOnTheRepository(t *testing.T) {
	files := gittest.ReadTree(t, "../../..", "base", "components", "overlays")
	dir := gitRepo(t, files)
	ragAPI := drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm-api", Name: "rag-api", Status: drift.Modified, Fields: []drift.Field{
		notifytest.At(drift.Field{Live: "registry.example.com/llm/rag-api:1.4.3", Change: drift.Changed}, "spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "api"), "image"),
		notifytest.At(drift.Field{Live: "search", Change: drift.Added}, "metadata", "labels", "team"),
	}}
	qwen := drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm-inference", Name: "vllm-qwen", Status: drift.Modified, Fields: []drift.Field{
		notifytest.At(drift.Field{Change: drift.Removed}, "spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "vllm"), "env", fieldpath.KeyByFields("name", "HF_HUB_OFFLINE")),
		notifytest.At(drift.Field{Live: "1.0", Change: drift.Changed}, "metadata", "annotations", "argocd.argoproj.io/sync-wave"),
	}}
	for _, env := range []string{"dev", "prod"} {
		t.Run(env, func(t *testing.T) {
			before := rendered(t, dir, env, qwen)
			_, ok := valueAt(before, qwen.Fields[0])
			require.True(t, ok, "Git declares HF_HUB_OFFLINE")
			a, err := Patch(env, readHead(t, dir), ragAPI, qwen)
			require.NoError(t, err)
			assert.Equal(t, 4, a.Fields)
			applyPatch(t, dir, a.Diff)
			assertAdopted(t, dir, env, ragAPI, a)
			assertAdopted(t, dir, env, qwen, a)
			git(t, dir, "reset", "-q", "--hard")
			git(t, dir, "clean", "-qfd")
		})
	}
}

func TestAdoptPatchNothingExpressible(t *testing.T) {
	dir := gitRepo(t, map[string]string{"overlays/dev/kustomization.yaml": devKust})
	a, err := Patch("dev", readHead(t, dir), notifytest.Deployment(aTolByIx))
	require.NoError(t, err)
	assert.Empty(t, a.Diff)
	assert.Equal(t, 0, a.Fields)
	require.Len(t, a.Notes, 1)
	assert.Contains(t, a.Notes[0], "list item addressed by index")
}

// assertAdopted renders env in dir and checks that each field of o the adoption did not leave
// out (a note) holds its live value there, or is gone for a removal.
func assertAdopted(t *testing.T, dir, env string, o drift.Object, a *Adoption) {
	t.Helper()
	obj := rendered(t, dir, env, o)
	for _, f := range o.Fields {
		if !expressible(f) || noted(a, f) {
			continue
		}
		got, ok := valueAt(obj, f)
		if f.Change == drift.Removed {
			assert.False(t, ok, "%s %s still rendered as %v\npatch:\n%s", o.Name, f.Path, got, a.Diff)
			continue
		}
		assert.True(t, ok, "%s %s not rendered\npatch:\n%s", o.Name, f.Path, a.Diff)
		if d := cmp.Diff(f.Live, got); d != "" {
			t.Errorf("%s %s rendered (-live +got):\n%s\npatch:\n%s", o.Name, f.Path, d, a.Diff)
		}
	}
}

func noted(a *Adoption, f drift.Field) bool {
	for _, n := range a.Notes {
		if strings.HasPrefix(n, f.Path+":") {
			return true
		}
	}
	return false
}

// expressible says whether a strategic-merge patch can say the field (not a list item by index
// or by value).
func expressible(f drift.Field) bool {
	els, err := pathElems(f)
	if err != nil {
		return false
	}
	for _, e := range els {
		if e.index >= 0 || e.value != nil {
			return false
		}
	}
	return true
}

// rendered renders env from the work tree (render.FromDir) and returns o there.
func rendered(t *testing.T, dir, env string, o drift.Object) map[string]any {
	t.Helper()
	src, err := render.FromDir(dir)
	require.NoError(t, err)
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: env})
	require.NoError(t, err)
	for _, u := range res.Objects {
		if u.GetKind() == o.Kind && u.GetName() == o.Name && u.GetNamespace() == o.Namespace {
			return u.Object
		}
	}
	t.Fatalf("%s %s/%s not rendered", o.Kind, o.Namespace, o.Name)
	return nil
}

// gitRepo is a work tree of a Git repository holding files, committed.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	return gittest.Clone(t, gittest.NewBare(t, t.TempDir(), "platform.git", files))
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gittest.Run(t, dir, args...)
}

// readHead reads the repository at its head commit, the way the daemon reads the audited revision.
func readHead(t *testing.T, dir string) ReadFunc {
	t.Helper()
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	head := git(t, dir, "rev-parse", "HEAD")
	return func(name string) ([]byte, error) { return repo.ReadFile(head, name) }
}

// applyPatch runs `git apply --check` and `git apply` with the patch, then stages the result.
func applyPatch(t *testing.T, dir, diff string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "adopt.diff")
	require.NoError(t, os.WriteFile(p, []byte(diff), 0o644))
	git(t, dir, "apply", "--check", p)
	git(t, dir, "apply", p)
	git(t, dir, "add", "-A")
}
