package render

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var kustomizeApp = map[string]string{
	"app/kustomization.yaml": "resources: [deploy.yaml, cm.yaml]\ncommonLabels:\n  team: llm\n",
	"app/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: llm-api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - {name: api, image: registry.example.com/llm/api:1.0}
        - {name: sidecar, image: envoy:1.30}
`,
	"app/cm.yaml":                         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: llm-api}\ndata: {mode: strict}\n",
	"components/debug/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n- patch: |-\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: settings, namespace: llm-api}\n    data: {debug: \"true\"}\n",
}

// kustomizeCLI applies the options as Argo CD does, with the kustomize CLI its repo-server runs
// (`kustomize edit ...` in the path, then `kustomize build`): the oracle for WithKustomize.
func kustomizeCLI(t *testing.T, files map[string]string, k *KustomizeOptions) []byte {
	t.Helper()
	kustomize := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Kustomize })
	dir := t.TempDir()
	writeTree(t, dir, files)
	for _, args := range k.edits() {
		cmd := exec.Command(kustomize, append([]string{"edit"}, args...)...)
		cmd.Dir = filepath.Join(dir, "app")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kustomize edit %v: %s", args, out)
	}
	if len(k.Components) > 0 {
		cmd := exec.Command(kustomize, append([]string{"edit", "add", "component"}, k.Components...)...)
		cmd.Dir = filepath.Join(dir, "app")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kustomize edit add component: %s", out)
	}
	cmd := exec.Command(kustomize, "build", filepath.Join(dir, "app"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kustomize build: %s", stderr.String())
	return out
}

// TestKustomizeOptionsRenderAsTheKustomizeCLI: every kustomize option Argo CD applies with
// `kustomize edit` gives, in process, the objects the kustomize CLI builds after the same edits.
// They are compared as a set: the CLI orders its output by kind (its --reorder legacy default),
// the embedded build keeps kustomize's own order, and Argo CD applies by wave and kind anyway.
func TestKustomizeOptionsRenderAsTheKustomizeCLI(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts KustomizeOptions
	}{
		{"name prefix and suffix", KustomizeOptions{NamePrefix: "blue-", NameSuffix: "-v2"}},
		{"images", KustomizeOptions{Images: []string{"registry.example.com/llm/api=registry.example.com/llm/api:2.0", "envoy=envoyproxy/envoy@sha256:24a0c4b4a4c0eb97a1aabb8e29f18e917d05abfe1b7a7c07857230879ce7d3d3"}}},
		{"replicas", KustomizeOptions{Replicas: []KustomizeReplica{{Name: "api", Count: 4}}}},
		{"labels and annotations", KustomizeOptions{CommonLabels: map[string]string{"tier": "gold"}, CommonAnnotations: map[string]string{"owner": "platform"}}},
		{"labels without selector", KustomizeOptions{CommonLabels: map[string]string{"tier": "gold"}, LabelWithoutSelector: true, LabelIncludeTemplates: true}},
		{"forced label over the kustomization's own", KustomizeOptions{CommonLabels: map[string]string{"team": "inference"}, ForceCommonLabels: true}},
		{"namespace", KustomizeOptions{Namespace: "llm-canary"}},
		{"components", KustomizeOptions{Components: []string{"../components/debug"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := decodeManifests("kustomize build", kustomizeCLI(t, kustomizeApp, &tc.opts))
			require.NoError(t, err)
			for name, src := range map[string]Source{"snapshot": snapshotSource(t, kustomizeApp, "r1"), "work tree": dirSource(t, kustomizeApp)} {
				s, err := src.WithKustomize(AppTarget("app"), &tc.opts)
				require.NoError(t, err, name)
				got, err := Engine{}.Render(context.Background(), s, Target{Name: AppTarget("app")})
				require.NoError(t, err, name)
				if d := cmp.Diff(want, got.Objects, byID); d != "" {
					t.Errorf("%s: (-kustomize CLI +auditor):\n%s", name, d)
				}
			}
		})
	}
	// What Argo CD's edit would refuse is an error: a label the kustomization has, unforced.
	_, err := snapshotSource(t, kustomizeApp, "r1").WithKustomize(AppTarget("app"), &KustomizeOptions{CommonLabels: map[string]string{"team": "x"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "team")
	_, err = snapshotSource(t, kustomizeApp, "r1").WithKustomize(AppTarget("app"), &KustomizeOptions{Components: []string{"../components/none"}})
	require.ErrorContains(t, err, "component ../components/none has no kustomization")
}

// byID orders objects by kind, namespace and name before a comparison.
var byID = cmpopts.SortSlices(func(a, b *unstructured.Unstructured) bool {
	return a.GetKind()+"/"+a.GetNamespace()+"/"+a.GetName() < b.GetKind()+"/"+b.GetNamespace()+"/"+b.GetName()
})

func dirSource(t *testing.T, files map[string]string) Source {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	s, err := FromDir(dir)
	require.NoError(t, err)
	return s
}
