package render

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// argoCDModule is the directory of the argo-cd module the auditor is built with.
func argoCDModule(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v3").Output()
	require.NoError(t, err, "the argo-cd module")
	return strings.TrimSpace(string(out))
}

// argoCDFixtures copies directories of Argo CD's own test data (base: a directory of the argo-cd
// module) into a new Git repository, as Argo CD's e2e tests serve theirs, and returns the Sources
// over its commit: the snapshot held in memory and the work tree on disk.
func argoCDFixtures(t *testing.T, base string, dirs ...string) map[string]Source {
	t.Helper()
	root := filepath.Join(argoCDModule(t), base)
	files := map[string]string{}
	for _, d := range dirs {
		err := filepath.Walk(filepath.Join(root, d), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			files[filepath.ToSlash(rel)] = string(data)
			return err
		})
		require.NoError(t, err, d)
	}
	return fixtureSources(t, files)
}

// fixtureSources commits files to a new Git repository and returns the Sources over it.
func fixtureSources(t *testing.T, files map[string]string) map[string]Source {
	t.Helper()
	dir := newRepo(t, files)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	snap, err := AtRevision(repo, "HEAD")
	require.NoError(t, err)
	tree, err := FromDir(dir)
	require.NoError(t, err)
	return map[string]Source{"snapshot": snap, "work tree": tree}
}

// refs names each object kind/name, sorted: a render compared as a set, as Argo CD's tests do.
func refs(objs []*unstructured.Unstructured) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(out)
	return out
}

type directoryCase struct {
	name string
	path string
	opts *DirectoryOptions
	// want are the objects (kind/name); err, when set, the error the render ends with instead.
	want []string
	err  string
	// check looks at the objects further.
	check func(t *testing.T, objs []*unstructured.Unstructured)
}

func runDirectoryCases(t *testing.T, sources map[string]Source, cases []directoryCase) {
	t.Helper()
	for _, tc := range cases {
		for name, src := range sources {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				res, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget(tc.path), Variant: Variant{Directory: tc.opts}})
				if tc.err != "" {
					require.ErrorContains(t, err, tc.err)
					return
				}
				require.NoError(t, err)
				assert.Empty(t, cmp.Diff(tc.want, refs(res.Objects)), "objects (-Argo CD +auditor)")
				if tc.check != nil {
					tc.check(t, res.Objects)
				}
			})
		}
	}
}

func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	require.NoError(t, err)
	require.True(t, found, "%s in %s", strings.Join(path, "."), o.GetName())
	return v
}

// Argo CD's e2e tests of directory sources (test/e2e/jsonnet_test.go, api_versions_test.go,
// hydrator_test.go), over their own fixtures: the objects each renders are the ones those tests
// expect Argo CD to sync.
func TestDirectoryOptionsOnArgoCDsE2EFixtures(t *testing.T) {
	sources := argoCDFixtures(t, "test/e2e/testdata", "jsonnet-tla", "jsonnet-tla-cm", "jsonnet-ext-var",
		"jsonnet-nested-dir-with-imports", "hydrator-directory", "crd-version-differences")
	env := map[string]string{"ARGOCD_APP_NAME": "my-app", "ARGOCD_APP_NAMESPACE": "ns"}
	nameFromEnv := func(t *testing.T, objs []*unstructured.Unstructured) {
		assert.Equal(t, map[string]any{"foo": "my-app", "bar": "my-app"}, field(t, objs[0], "data"))
	}
	replicas := func(name string, n int64) func(*testing.T, []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					assert.Equal(t, name, o.GetName())
					assert.Equal(t, n, field(t, o, "spec", "replicas"))
				}
			}
		}
	}
	runDirectoryCases(t, sources, []directoryCase{{
		name: "TestJsonnetAppliedCorrectly: a Jsonnet file without options",
		path: "jsonnet-tla",
		want: []string{"Deployment/jsonnet-guestbook-ui", "Service/jsonnet-guestbook-ui"}, check: replicas("jsonnet-guestbook-ui", 1),
	}, {
		name: "TestJsonnetTlaParameterAppliedCorrectly: a string and a code argument",
		path: "jsonnet-tla",
		opts: &DirectoryOptions{Jsonnet: JsonnetOptions{TLAs: []JsonnetVar{{Name: "name", Value: "testing-tla"}, {Name: "replicas", Value: "0", Code: true}}}},
		want: []string{"Deployment/testing-tla", "Service/testing-tla"}, check: replicas("testing-tla", 0),
	}, {
		name: "TestJsonnetTlaEnv: arguments from the build environment",
		path: "jsonnet-tla-cm",
		opts: &DirectoryOptions{Jsonnet: JsonnetOptions{Env: env,
			TLAs: []JsonnetVar{{Name: "foo", Value: "$ARGOCD_APP_NAME"}, {Name: "bar", Value: "'$ARGOCD_APP_NAME'", Code: true}}}},
		want: []string{"ConfigMap/my-map"}, check: nameFromEnv,
	}, {
		name: "TestJsonnetExtVarEnv: external variables from the build environment",
		path: "jsonnet-ext-var",
		opts: &DirectoryOptions{Jsonnet: JsonnetOptions{Env: env,
			ExtVars: []JsonnetVar{{Name: "foo", Value: "$ARGOCD_APP_NAME"}, {Name: "bar", Value: "'$ARGOCD_APP_NAME'", Code: true}}}},
		want: []string{"ConfigMap/my-map"}, check: nameFromEnv,
	}, {
		name: "TestJsonnetExtVarEnv without its variables: Argo CD fails it too",
		path: "jsonnet-ext-var",
		err:  "Undefined external variable",
	}, {
		name: "TestJsonnetNestedDirWithImports: recurse, imports relative to each file",
		path: "jsonnet-nested-dir-with-imports/apps",
		opts: &DirectoryOptions{Recurse: true},
		want: []string{"Namespace/hello-root", "Namespace/hello-world"},
	}, {
		name: "the same without recurse: the subdirectory is not read",
		path: "jsonnet-nested-dir-with-imports/apps",
		want: []string{"Namespace/hello-root"},
	}, {
		name: "TestHydratorWithDirectory: recurse",
		path: "hydrator-directory",
		opts: &DirectoryOptions{Recurse: true},
		want: []string{"ConfigMap/my-map", "ConfigMap/my-map-subdir"},
	}, {
		name: "recurse excluding the subdirectory",
		path: "hydrator-directory",
		opts: &DirectoryOptions{Recurse: true, Exclude: "subdir/*"},
		want: []string{"ConfigMap/my-map"},
	}, {
		name: "TestAppSyncWrongVersion: include",
		path: "crd-version-differences",
		opts: &DirectoryOptions{Include: "crd-v1alpha1.yaml"},
		want: []string{"CustomResourceDefinition/fakes.argoproj.io"},
	}, {
		name: "TestAppSyncWrongVersion: include and exclude",
		path: "crd-version-differences",
		opts: &DirectoryOptions{Include: "crd-wronggroup-instance.yaml", Exclude: "crd-v1alpha2-instance.yaml"},
		want: []string{"Fake/fake-crd-instance-wronggroup"},
	}, {
		name: "TestAppSyncWrongVersion: an include the exclude does not touch",
		path: "crd-version-differences",
		opts: &DirectoryOptions{Include: "crd-does-not-exist-instance.yaml", Exclude: "crd-wronggroup-instance.yaml"},
		want: []string{"DoesNotExist/dummy-crd-instance-doesnotexist"},
	}})
}

// Argo CD's repo-server unit tests of directory sources (reposerver/repository
// repository_test.go: TestFindResources, TestFindManifests_Exclude*, the Jsonnet imports and
// library paths out of the repository), over their own test data.
func TestDirectoryOptionsOnArgoCDsRepoServerTestData(t *testing.T) {
	sources := argoCDFixtures(t, "reposerver/repository/testdata", "app-include-exclude", "jsonnet",
		"jsonnet-import-abs-outside", "jsonnet-import-traversal-outside")
	glob := func(include, exclude string) *DirectoryOptions {
		return &DirectoryOptions{Recurse: true, Include: include, Exclude: exclude}
	}
	both := []string{"Deployment/nginx-deployment", "Deployment/nginx-deployment-sub"}
	runDirectoryCases(t, sources, []directoryCase{
		{name: "Include One Match", path: "app-include-exclude", opts: glob("subdir/deploymentSub.yaml", ""), want: []string{"Deployment/nginx-deployment-sub"}},
		{name: "Include Everything (* matches /)", path: "app-include-exclude", opts: glob("*.yaml", ""), want: both},
		{name: "Include Subdirectory", path: "app-include-exclude", opts: glob("**/*.yaml", ""), want: []string{"Deployment/nginx-deployment-sub"}},
		{name: "Include No Matches", path: "app-include-exclude", opts: glob("nothing.yaml", ""), want: []string{}},
		{name: "Exclude One Match", path: "app-include-exclude", opts: glob("", "subdir/deploymentSub.yaml"), want: []string{"Deployment/nginx-deployment"}},
		{name: "Exclude Everything", path: "app-include-exclude", opts: glob("", "*.yaml"), want: []string{}},
		{name: "Exclude Nothing Matches", path: "app-include-exclude", opts: glob("", "nothing.yaml"), want: both},
		{name: "TestGenerateJsonnetLibOutside", path: "jsonnet", opts: &DirectoryOptions{Jsonnet: JsonnetOptions{Libs: []string{"../../../testdata/jsonnet/vendor"}}},
			err: "file '../../../testdata/jsonnet/vendor' resolved to outside repository root"},
		{name: "TestGenerateJsonnetImportAbsoluteOutsideRepoRoot", path: "jsonnet-import-abs-outside", opts: &DirectoryOptions{}, err: "resolves outside repository root"},
		{name: "TestGenerateJsonnetImportTraversalOutsideRepoRoot", path: "jsonnet-import-traversal-outside", opts: &DirectoryOptions{}, err: "resolves outside repository root"},
	})
}

// Which files of a directory source are manifests, and which of their documents are objects:
// Argo CD's repo-server unit tests (reposerver/repository repository_test.go: TestFindManifests'
// YAML and JSON cases, TestInvalidManifestsInDir, TestSkippedInvalidManifestsInDir,
// TestGenerateNullList, TestNilMetadataAccessors) over their own test data, then the cases where
// the auditor read otherwise before: a document may lack a name or an apiVersion, a file that
// fails to decode is ignored unless it holds "apiVersion:", "kind:" and "metadata:".
func TestDirectoryManifestsAsArgoCDsRepoServerReadsThem(t *testing.T) {
	sources := argoCDFixtures(t, "reposerver/repository/testdata", "partially-valid-yaml", "invalid-manifests",
		"invalid-manifests-skipped", "irrelevant-yaml", "json-list", "invalid-json", "valid-json",
		"yaml-with-empty-document", "null-list", "empty-list", "weird-list", "nil-metadata-accessors")
	runDirectoryCases(t, sources, []directoryCase{
		{name: "partially valid YAML file throws an error", path: "partially-valid-yaml", err: "partially-valid.yaml"},
		{name: "invalid manifest throws an error", path: "invalid-manifests", err: "bad.yaml"},
		{name: "invalid manifest containing '+argocd:skip-file-rendering' doesn't throw an error", path: "invalid-manifests-skipped", want: []string{}},
		{name: "irrelevant YAML gets skipped, relevant YAML gets parsed (a ConfigMap without a name)", path: "irrelevant-yaml", want: []string{"ConfigMap/"}},
		{name: "multiple JSON objects in one file throws an error", path: "json-list", err: "more than one JSON value"},
		{name: "invalid JSON throws an error", path: "invalid-json", err: "invalid.json"},
		{name: "valid JSON returns manifest and no error", path: "valid-json", want: []string{"ConfigMap/"}},
		{name: "YAML with an empty document doesn't throw an error", path: "yaml-with-empty-document", want: []string{"ConfigMap/"}},
		{name: "null list", path: "null-list", want: []string{"ServiceAccount/prometheus-operator-operator"}},
		{name: "empty list", path: "empty-list", want: []string{"ServiceAccount/prometheus-operator-operator"}},
		{name: "weird list", path: "weird-list", want: []string{"NotAList/", "ServiceAccount/prometheus-operator-operator"}},
		{name: "nil metadata accessors", path: "nil-metadata-accessors", opts: &DirectoryOptions{Recurse: true}, want: []string{"ConfigMap/my-map"}},
	})

	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"
	runDirectoryCases(t, fixtureSources(t, map[string]string{
		"app/cm.yaml": cm,
		// A kustomize replacements file: a list, naming kind and metadata but none with a colon.
		"app/replacements.yaml":      "- source: {kind: ConfigMap, name: cm, fieldPath: metadata.name}\n  targets:\n  - select: {kind: Deployment}\n    fieldPaths: [metadata.annotations.x]\n",
		"app/settings.yaml":          "apiVersion is: not a manifest\nkind: of settings\n- metadata\n",
		"app/no-version.yaml":        "kind: ConfigMap\nmetadata: {name: no-version}\n",
		"app/no-name.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {labels: {a: b}}\n",
		"app/comments.yaml":          "---\n# nothing\n---\n\n---\n" + cm,
		"app/sub/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata: {name: sub}\nresources: [cm.yaml]\n",
		"app/sub/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub-cm}\n",
		"bad/second.yaml":            cm + "---\n- a list\n",
		"bad/kindless.yaml":          "apiVersion: v1\nmetadata: {name: x}\nkind:\n  - not a string\n",
		"pkg/package.json":           `{"name": "tools", "dependencies": {"left-pad": "1.0.0"}}`,
		"empty/empty.json":           "",
		"list/items.json":            `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}`,
	}), []directoryCase{{
		name: "a replacements file and settings are ignored; a document without an apiVersion or a name is kept",
		path: "app",
		want: []string{"ConfigMap/", "ConfigMap/cm", "ConfigMap/cm", "ConfigMap/no-version"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, o := range objs {
				if o.GetName() == "no-version" {
					assert.Empty(t, o.GetAPIVersion())
				}
			}
		},
	}, {
		name: "recurse: a kustomization.yaml is an object of its own, as Argo CD reads it",
		path: "app", opts: &DirectoryOptions{Recurse: true},
		want: []string{"ConfigMap/", "ConfigMap/cm", "ConfigMap/cm", "ConfigMap/no-version", "ConfigMap/sub-cm", "Kustomization/sub"},
	}, {
		name: "a document that fails after one that decoded fails the render", path: "bad", opts: &DirectoryOptions{Include: "second.yaml"},
		err: "second.yaml: document 2",
	}, {
		name: "a document without a kind in a file that looks like a manifest", path: "bad", opts: &DirectoryOptions{Include: "kindless.yaml"},
		err: "kindless.yaml",
	}, {
		name: "a JSON object without a kind: Argo CD's controller fails on it", path: "pkg", err: "package.json: an object without a kind",
	}, {
		name: "an empty JSON file: Argo CD's repo-server fails on it", path: "empty", err: "empty.json: the file holds no JSON value",
	}, {
		name: "a List item without a kind", path: "list", err: "items.json: an object without a kind",
	}})
}
