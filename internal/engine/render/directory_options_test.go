package render

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

func configMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// jsonnetConfigMap is a Jsonnet file whose ConfigMap name holds data.value, an expression.
func jsonnetConfigMap(name, value string) string {
	return "{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: '" + name + "'}, data: {value: " + value + "}}\n"
}

// Which files a directory source reads, the Jsonnet search path and outputs, and the build
// environment, on both kinds of Source, as Argo CD's repo-server reads them (its
// Test_findManifests_disableExtensionFilter, makeJsonnetVM, confinedImporter).
func TestDirectoryOptionsAsArgoCDReadsThem(t *testing.T) {
	sealed := "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata:\n  name: my-secret\n"
	sources := fixtureSources(t, map[string]string{
		"sealed/my-secret.yaml.sealed": sealed,
		"sealed/a.yaml":                configMap("a"),
		"sealed/lib.libsonnet":         "{}\n", // only imported: never a manifest
		"sealed/skip.jsonnet":          "// +argocd:skip-file-rendering\n" + jsonnetConfigMap("skipped", "'x'"),
		"lib1/common.libsonnet":        "{from: 'lib1'}\n",
		"lib2/common.libsonnet":        "{from: 'lib2'}\n",
		"app/main.jsonnet":             "local c = import 'common.libsonnet';\n" + jsonnetConfigMap("main", "c.from"),
		"app/common.libsonnet":         "{from: 'app'}\n",
		"app/sub/nested.jsonnet":       "local c = import 'common.libsonnet';\n" + jsonnetConfigMap("nested", "c.from"),
		"out/array.jsonnet":            "[null, " + jsonnetConfigMap("a1", "'1'") + "]\n",
		"out/list.jsonnet":             "{apiVersion: 'v1', kind: 'List', items: [" + jsonnetConfigMap("l1", "'1'") + "]}\n",
		"out/null-list.jsonnet":        "{apiVersion: 'v1', kind: 'ConfigMapList', items: null}\n",
		"bad/numbers.jsonnet":          "[1, 2]\n",
		"secret/no-kind.jsonnet":       "{data: {password: 'hunter2'}}\n",
		"twice/a.jsonnet":              "function(v) " + jsonnetConfigMap("a", "v"),
		"twice/b.jsonnet":              "function(v) " + jsonnetConfigMap("b", "v"),
		"kust/kustomization.yaml":      "resources: [cm.yaml]\nnamePrefix: k-\n",
		"kust/cm.yaml":                 configMap("d"),
	})
	value := func(want map[string]string) func(*testing.T, []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			got := map[string]string{}
			for _, o := range objs {
				got[o.GetName()], _, _ = unstructured.NestedString(o.Object, "data", "value")
			}
			assert.Empty(t, cmp.Diff(want, got), "data.value by name (-want +got)")
		}
	}
	env := map[string]string{"ARGOCD_APP_NAME": "my-app"}
	runDirectoryCases(t, sources, []directoryCase{
		{name: "the extension filter, Jsonnet libraries ignored, the skip marker", path: "sealed", want: []string{"ConfigMap/a"}},
		{name: "the extension filter comes before include", path: "sealed", opts: &DirectoryOptions{Include: "{*.yaml.sealed,*.yaml}"}, want: []string{"ConfigMap/a"}},
		{name: "disableExtensionFilter with include", path: "sealed", opts: &DirectoryOptions{DisableExtensionFilter: true, Include: "{*.yaml.sealed,*.yaml}"},
			want: []string{"ConfigMap/a", "SealedSecret/my-secret"}},
		{name: "an import beside the file first", path: "app", want: []string{"ConfigMap/main"}, check: value(map[string]string{"main": "app"})},
		{name: "then the libraries, the last first", path: "app/sub", opts: &DirectoryOptions{Jsonnet: JsonnetOptions{Libs: []string{"lib1", "lib2"}}},
			want: []string{"ConfigMap/nested"}, check: value(map[string]string{"nested": "lib2"})},
		{name: "a library path from the repository root, absolute or not", path: "app/sub", opts: &DirectoryOptions{Jsonnet: JsonnetOptions{Libs: []string{"/lib1"}}},
			want: []string{"ConfigMap/nested"}, check: value(map[string]string{"nested": "lib1"})},
		{name: "then the source path", path: "app", opts: &DirectoryOptions{Recurse: true},
			want: []string{"ConfigMap/main", "ConfigMap/nested"}, check: value(map[string]string{"main": "app", "nested": "app"})},
		{name: "an import found nowhere", path: "app/sub", err: `couldn't open import "common.libsonnet": no match locally or in the Jsonnet library paths`},
		{name: "outputs: an array (nulls skipped), a List, a List of null", path: "out", want: []string{"ConfigMap/a1", "ConfigMap/l1"}},
		{name: "an output of no objects", path: "bad", err: "bad/numbers.jsonnet: the Jsonnet output is neither an object with a kind nor an array of them"},
		{name: "each evaluation substitutes the environment once more, as Argo CD's in-place substitution does", path: "twice",
			opts: &DirectoryOptions{Jsonnet: JsonnetOptions{Env: env, TLAs: []JsonnetVar{{Name: "v", Value: "$$ARGOCD_APP_NAME"}}}},
			want: []string{"ConfigMap/a", "ConfigMap/b"}, check: value(map[string]string{"a": "$ARGOCD_APP_NAME", "b": "my-app"})},
		{name: "a kustomization without directory options", path: "kust", want: []string{"ConfigMap/k-d"}},
		{name: "directory options name the type: the kustomization is not built", path: "kust", opts: &DirectoryOptions{}, want: []string{"ConfigMap/d"}},
	})
	for name, src := range sources {
		_, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget("secret")})
		require.Error(t, err, name)
		assert.NotContains(t, err.Error(), "hunter2", "%s: a Jsonnet output that is no object is never quoted", name)
	}
}

// Argo CD refuses a directory whose files (but Jsonnet's) pass 10 MB together.
func TestDirectoryCombinedSizeLimit(t *testing.T) {
	big := configMap("big") + "data:\n  blob: " + strings.Repeat("x", 6_000_000) + "\n"
	src, err := fromFiles(map[string][]byte{"d/a.yaml": []byte(big), "d/sub/b.yaml": []byte(big)}, nil, "r1")
	require.NoError(t, err)
	_, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("d")})
	require.NoError(t, err, "one file without recurse")
	_, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("d"), Variant: Variant{Directory: &DirectoryOptions{Recurse: true}}})
	assert.ErrorContains(t, err, "--max-combined-directory-manifests-size")
}

// Symlinks, which only a work tree on disk has: followed inside the repository, a missing
// target skipped, a directory never walked into, and one leading out of the repository refused,
// for a manifest and for a Jsonnet import.
func TestDirectorySymlinksInAWorkTree(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.libsonnet")
	require.NoError(t, os.WriteFile(outside, []byte("{from: 'outside'}\n"), 0o644))
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"real/cm.yaml":         configMap("real"),
		"app/own.yaml":         configMap("own"),
		"escape/main.jsonnet":  "local c = import 'secret.libsonnet';\n" + jsonnetConfigMap("main", "c.from"),
		"inbound/main.jsonnet": "local c = import 'shared.libsonnet';\n" + jsonnetConfigMap("main", "c.from"),
		"shared/lib.libsonnet": "{from: 'shared'}\n",
	})
	for link, target := range map[string]string{
		"app/link.yaml":            "../real/cm.yaml",
		"app/dangling.yaml":        "../nowhere.yaml",
		"app/dir.yaml":             "../real",
		"out/leak.yaml":            outside,
		"escape/secret.libsonnet":  outside,
		"inbound/shared.libsonnet": "../shared/lib.libsonnet",
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(link)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
	}
	src, err := FromDir(dir)
	require.NoError(t, err)
	runDirectoryCases(t, map[string]Source{"work tree": src}, []directoryCase{
		{name: "followed inside, skipped when missing or a directory", path: "app", opts: &DirectoryOptions{Recurse: true}, want: []string{"ConfigMap/own", "ConfigMap/real"}},
		{name: "a manifest out of the repository", path: "out", err: `illegal filepath in symlink at "leak.yaml"`},
		{name: "an import out of the repository", path: "escape", err: `jsonnet import "secret.libsonnet" resolves outside repository root`},
		{name: "an import inside", path: "inbound", want: []string{"ConfigMap/main"}},
	})
}

// A render with directory options is cached apart from one with other options or none, by
// revision and by content, and a Worker renders it as the process does.
func TestDirectoryOptionsInTheCache(t *testing.T) {
	files := map[string]string{"d/a.yaml": configMap("a"), "d/b.yaml": configMap("b"), "d/sub/c.yaml": configMap("c"),
		"d/tla.jsonnet": "function(name='none') " + jsonnetConfigMap("tla", "name")}
	opts := []*DirectoryOptions{nil, {Include: "a.yaml"}, {Include: "b.yaml"}, {Recurse: true},
		{Jsonnet: JsonnetOptions{TLAs: []JsonnetVar{{Name: "name", Value: "$ARGOCD_APP_NAME"}}, Env: map[string]string{"ARGOCD_APP_NAME": "x"}}}}
	want := [][]string{{"ConfigMap/a", "ConfigMap/b", "ConfigMap/tla"}, {"ConfigMap/a"}, {"ConfigMap/b"},
		{"ConfigMap/a", "ConfigMap/b", "ConfigMap/c", "ConfigMap/tla"}, {"ConfigMap/a", "ConfigMap/b", "ConfigMap/tla"}}
	c := NewCache("", 8)
	for _, rev := range []string{"r1", "r2"} { // r2: the same files, answered by content
		src := snapshotSource(t, files, rev)
		for i, o := range opts {
			res, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: AppTarget("d"), Variant: Variant{Directory: o}})
			require.NoError(t, err)
			assert.Empty(t, cmp.Diff(want[i], refs(res.Objects)), "%s, options %d (-want +got)", rev, i)
		}
	}
	assert.Equal(t, CacheStats{ByContent: len(opts), Rendered: len(opts)}, c.Stats(), "each rendered once, then found by content")

	w := NewCache("", 2)
	w.Worker = NewWorker()
	res, err := Engine{Cache: w}.Render(context.Background(), snapshotSource(t, files, "r1"), Target{Name: AppTarget("d"), Variant: Variant{Directory: opts[4]}})
	require.NoError(t, err)
	assert.EqualValues(t, 1, w.Worker.Started())
	assert.Empty(t, cmp.Diff(want[4], refs(res.Objects)))
	for _, o := range res.Objects {
		if o.GetName() == "tla" {
			assert.Equal(t, "x", o.Object["data"].(map[string]any)["value"], "the worker evaluated the argument with the environment")
		}
	}
}

// The build environment is part of a render's key only where a value names it: else every
// revision's render (ARGOCD_APP_REVISION) would be a new one.
func TestDirectoryOptionsDigestCountsTheEnvironmentWhereUsed(t *testing.T) {
	at := func(rev, value string) string {
		return (&DirectoryOptions{Jsonnet: JsonnetOptions{TLAs: []JsonnetVar{{Name: "v", Value: value}}, Env: map[string]string{"ARGOCD_APP_REVISION": rev}}}).digest()
	}
	assert.Equal(t, at("r1", "fixed"), at("r2", "fixed"))
	assert.NotEqual(t, at("r1", "$ARGOCD_APP_REVISION"), at("r2", "$ARGOCD_APP_REVISION"))
	assert.NotEqual(t, (&DirectoryOptions{}).digest(), (*DirectoryOptions)(nil).digest(), "empty options still name the type")
}

// A Git snapshot holds no symlinks, only their names (gitrepo.Snapshot.Symlinks). A directory
// render that would read one, as Argo CD's repo-server does, refuses and names it rather than
// render part of the source; one it would not read (another extension, excluded, in a
// subdirectory without recurse) changes nothing. A work tree follows it. A Worker is told the
// names too.
func TestDirectorySymlinksInAGitSnapshot(t *testing.T) {
	dir := newRepo(t, map[string]string{"real/cm.yaml": configMap("real"), "app/own.yaml": configMap("own")})
	for link, target := range map[string]string{"app/link.yaml": "../real/cm.yaml", "app/notes.md": "../real/cm.yaml", "app/sub/deep.yaml": "../../real/cm.yaml"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(link)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "links")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	snap, err := AtRevision(repo, "HEAD")
	require.NoError(t, err)
	refusal := "app/link.yaml is a symlink in Git, which Argo CD's repo-server follows and the auditor's in-process render does not read: render this Application with Argo CD's repo-server"
	runDirectoryCases(t, map[string]Source{"snapshot": snap}, []directoryCase{
		{name: "a symlinked manifest: refused, named", path: "app", err: refusal},
		{name: "a plain directory source (no options) too", path: "app", opts: &DirectoryOptions{}, err: refusal},
		{name: "recurse names each one", path: "app", opts: &DirectoryOptions{Recurse: true}, err: "app/link.yaml, app/sub/deep.yaml is a symlink"},
		{name: "excluded: not read", path: "app", opts: &DirectoryOptions{Exclude: "link.yaml"}, want: []string{"ConfigMap/own"}},
		{name: "not included: not read", path: "app", opts: &DirectoryOptions{Include: "own.yaml"}, want: []string{"ConfigMap/own"}},
		{name: "without the extension filter, notes.md counts", path: "app", opts: &DirectoryOptions{DisableExtensionFilter: true, Exclude: "link.yaml"}, err: "app/notes.md is a symlink"},
		{name: "another directory: nothing to refuse", path: "real", want: []string{"ConfigMap/real"}},
	})
	tree, err := FromDir(dir)
	require.NoError(t, err)
	runDirectoryCases(t, map[string]Source{"work tree": tree}, []directoryCase{
		{name: "a work tree follows it", path: "app", want: []string{"ConfigMap/own", "ConfigMap/real"}},
	})

	var req bytes.Buffer
	require.NoError(t, writeRequest(&req, snap.WithDirectory(&DirectoryOptions{}), AppTarget("app")))
	dec := json.NewDecoder(&req)
	var head workerRequest
	require.NoError(t, dec.Decode(&head))
	child, err := requestSource(dec, head)
	require.NoError(t, err)
	_, err = Engine{}.Render(context.Background(), child, Target{Name: AppTarget("app"), Variant: Variant{Directory: &DirectoryOptions{}}})
	require.ErrorContains(t, err, refusal, "a Worker's source knows the symlinks")
}
