package render

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
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

// TestRenderCacheByWhatTheRenderRead renders prod at successive commits through one cache: a
// commit that changes nothing prod reads reuses the render, one that changes a file it reads
// does not, and a new process (a new cache on the same directory) starts warm.
func TestRenderCacheByWhatTheRenderRead(t *testing.T) {
	dir := newRepo(t, miniRepo)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	cacheDir := t.TempDir()
	c := NewCache(cacheDir, 4)

	renderAt := func(c *Cache, rev string) *Result {
		t.Helper()
		if res, ok := c.ByRevision("prod", rev); ok {
			return res
		}
		snap, err := repo.Snapshot(rev)
		require.NoError(t, err)
		src, err := FromSnapshot(snap)
		require.NoError(t, err)
		res, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
		require.NoError(t, err)
		return res
	}
	uncached := func(rev string) *Result {
		t.Helper()
		snap, err := repo.Snapshot(rev)
		require.NoError(t, err)
		src, err := FromSnapshot(snap)
		require.NoError(t, err)
		res, err := Engine{}.Render(context.Background(), src, Target{Name: "prod"})
		require.NoError(t, err)
		return res
	}
	same := func(want, got *Result) {
		t.Helper()
		assert.Equal(t, want.Revision, got.Revision)
		require.NotEmpty(t, want.Digest)
		assert.Equal(t, want.Digest, got.Digest, "the same YAML stream")
		require.Len(t, got.Objects, len(want.Objects))
		for i := range want.Objects {
			assert.Empty(t, cmp.Diff(want.Objects[i].Object, got.Objects[i].Object))
		}
	}

	first := git(t, dir, "rev-parse", "HEAD")
	same(uncached(first), renderAt(c, first))
	same(uncached(first), renderAt(c, first))
	assert.Equal(t, CacheStats{Rendered: 1, ByRevision: 1}, c.Stats())

	// Only dev and docs change: prod's render is reused, under the new revision.
	writeTree(t, dir, map[string]string{"docs/x.md": "x\n", "overlays/dev/kustomization.yaml": "resources: [../../base/app]\nnamePrefix: dev-\n"})
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "dev and docs")
	second := git(t, dir, "rev-parse", "HEAD")
	same(uncached(second), renderAt(c, second))
	assert.Equal(t, CacheStats{Rendered: 1, ByRevision: 1, ByContent: 1}, c.Stats())

	// A base file prod reads changes: kustomize runs again.
	writeTree(t, dir, map[string]string{"base/app/cm.yaml": strings.Replace(miniRepo["base/app/cm.yaml"], "name: app", "name: app\n  labels: {team: search}", 1)})
	git(t, dir, "commit", "-qam", "base")
	third := git(t, dir, "rev-parse", "HEAD")
	got := renderAt(c, third)
	same(uncached(third), got)
	assert.Contains(t, string(got.YAML), "team: search")
	assert.Equal(t, 2, c.Stats().Rendered)

	// A file added where kustomize looks for a kustomization (a second spelling is an error
	// kustomize must report) changes what the render finds: no reuse.
	writeTree(t, dir, map[string]string{"overlays/prod/kustomization.yml": "resources: []\n"})
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "second kustomization file")
	snap, err := repo.Snapshot("HEAD")
	require.NoError(t, err)
	src, err := FromSnapshot(snap)
	require.NoError(t, err)
	_, err = Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
	assert.Error(t, err, "two kustomization files: kustomize's error, not a cached render")

	// A new process on the same directory starts warm; a corrupt file is a miss, not an error.
	warm := NewCache(cacheDir, 4)
	same(uncached(second), renderAt(warm, second))
	assert.Equal(t, CacheStats{ByRevision: 1}, warm.Stats())
	files, err := filepath.Glob(filepath.Join(cacheDir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.NoError(t, os.WriteFile(files[0], []byte("{not json"), 0o600))
	cold := NewCache(cacheDir, 4)
	same(uncached(third), renderAt(cold, third))
	assert.Equal(t, CacheStats{Rendered: 1}, cold.Stats())
}

// TestRenderReachingOutsideIsNotCached: a kustomization that names a URL where kustomize loads
// something (a remote base or file, a Helm chart) fetches what no probe records, so its render is
// never reused; a URL in inline content kustomize does not fetch (a patch's value, a comment)
// does not keep a render out of the cache.
func TestRenderReachingOutsideIsNotCached(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "upstream" // /cm.yaml: a resource of its own; /patch.yaml: a patch of base/app's
		if r.URL.Path == "/patch.yaml" {
			name = "app"
		}
		_, _ = io.WriteString(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: llm-api}\ndata: {k: v}\n")
	}))
	defer srv.Close()
	// renders renders prod twice with its kustomization (and more files), checking each render,
	// and returns how the cache answered.
	renders := func(kustomization string, more map[string]string, check func(*Result)) CacheStats {
		t.Helper()
		files := maps.Clone(miniRepo)
		files["overlays/prod/kustomization.yaml"] = kustomization
		maps.Copy(files, more)
		repo, err := gitrepo.Open(newRepo(t, files))
		require.NoError(t, err)
		c := NewCache("", 4)
		for range 2 {
			snap, err := repo.Snapshot("HEAD")
			require.NoError(t, err)
			src, err := FromSnapshot(snap)
			require.NoError(t, err)
			res, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
			require.NoError(t, err)
			if check != nil {
				check(res)
			}
		}
		return c.Stats()
	}
	fetched := []string{
		"resources: [../../base/app, " + srv.URL + "/cm.yaml]\n",
		"resources: [../../base/app]\npatches:\n  - path: " + srv.URL + "/patch.yaml\n",
	}
	for _, k := range fetched {
		assert.Equal(t, CacheStats{Rendered: 2}, renders(k, nil, nil), "rendered twice, never from the cache:\n%s", k)
	}
	// A builtin generator's config, listed by the kustomization, whose file is a URL.
	generator := map[string]string{"overlays/prod/generator.yaml": "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: upstream, namespace: llm-api}\nfiles: [k=" + srv.URL + "/k]\n"}
	// A builtin transformer's config in the second document of its file, whose patch is a URL.
	transformers := map[string]string{"overlays/prod/transformers.yaml": "apiVersion: builtin # labels first\nkind: LabelTransformer\nmetadata: {name: l}\nlabels: {team: search}\nfieldSpecs: [{path: metadata/labels, create: true}]\n---\n" +
		"apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: " + srv.URL + "/patch.yaml\n"}
	assert.Equal(t, CacheStats{Rendered: 2}, renders("resources: [../../base/app]\ntransformers: [transformers.yaml]\n", transformers, func(res *Result) {
		k, _, _ := unstructured.NestedString(res.Objects[0].Object, "data", "k")
		require.Equal(t, "v", k, "the patch the server sent applied: %s", res.YAML)
	}))
	assert.Equal(t, CacheStats{Rendered: 2}, renders("resources: [../../base/app]\ngenerators: [generator.yaml]\n", generator, func(res *Result) {
		var fetched []string
		for _, o := range res.Objects {
			if strings.HasPrefix(o.GetName(), "upstream") {
				k, _, _ := unstructured.NestedString(o.Object, "data", "k")
				fetched = append(fetched, k)
			}
		}
		require.Len(t, fetched, 1)
		require.Contains(t, fetched[0], "name: upstream", "the generator's file is what the server sent")
	}))
	inline := []string{
		"# weights from s3://models/qwen\nresources: [../../base/app]\n",
		"resources: [../../base/app]\npatches:\n  - target: {kind: ConfigMap}\n    patch: |-\n      - op: add\n        path: /data/uri\n        value: s3://models/qwen\n",
		"resources: [../../base/app]\ncommonAnnotations: {source: \"https://github.com/org/repo\"}\n",
	}
	for _, k := range inline {
		assert.Equal(t, CacheStats{Rendered: 1, ByRevision: 1}, renders(k, nil, nil), "rendered once, then from the cache:\n%s", k)
	}
}

// TestSharedCacheDecodesOnce: a Shared cache answers repeated hits with the same decoded objects
// (no decoding at every audit); an unshared one with a fresh copy each time.
func TestSharedCacheDecodesOnce(t *testing.T) {
	dir := newRepo(t, miniRepo)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	snap, err := repo.Snapshot("HEAD")
	require.NoError(t, err)
	src, err := FromSnapshot(snap)
	require.NoError(t, err)
	for _, shared := range []bool{true, false} {
		c := NewCache("", 2)
		c.Shared = shared
		first, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
		require.NoError(t, err)
		a, ok := c.ByRevision("prod", snap.Revision)
		require.True(t, ok)
		b, ok := c.ByRevision("prod", snap.Revision)
		require.True(t, ok)
		require.NotEmpty(t, a.Objects)
		assert.Equal(t, shared, a.Objects[0] == b.Objects[0], "shared %v: same objects on two hits", shared)
		assert.Equal(t, shared, first.Objects[0] == a.Objects[0], "shared %v: hits share the render that filled the cache", shared)
		assert.Empty(t, cmp.Diff(first.Objects[0].Object, a.Objects[0].Object))
	}
}

// TestReadsRemote: where a kustomization (or a builtin plugin's config) names something
// kustomize fetches, in any spelling kustomize accepts, and where a URL is only inline content.
func TestReadsRemote(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		remote     bool
	}{
		{"https resource", "resources: [https://example.com/cm.yaml]", true},
		{"git over ssh", "resources: [git@github.com:org/repo//base]", true},
		{"any user's ssh remote", "resources: [deploy@git.example.com:org/repo.git//base]", true},
		{"github scp form", "resources: [github.com:org/repo//base]", true},
		{"github in capitals", "resources: [GitHub.com/org/repo//base]", true},
		{"component", "components: [https://example.com/c]", true},
		{"patch file", "patches: [{path: 'https://example.com/p.yaml'}]", true},
		{"generator file", "configMapGenerator: [{name: x, files: ['k=https://example.com/f']}]", true},
		{"openapi", "openapi: {path: 'https://example.com/schema.json'}", true},
		{"helm chart", "helmCharts: [{name: x, repo: oci://example.com/x}]", true},
		{"unparsable with a url", "resources: [https://example.com/cm.yaml", true},
		{"local", "resources: [../../base/app]", false},
		{"url in a comment", "# weights from s3://models/qwen\nresources: [../base]", false},
		{"url in an inline patch", "patches:\n- target: {kind: Job}\n  patch: |-\n    - {op: add, path: /x, value: 's3://models/q'}", false},
		{"inline strategic merge patch", "patchesStrategicMerge: ['{\"kind\": \"X\", \"url\": \"https://a\"}']", false},
		{"image on gitlab's registry", "images: [{name: app, newName: registry.gitlab.com/org/app}]", false},
		{"generator literal and options", "configMapGenerator: [{name: x, literals: ['u=s3://b/k'], options: {annotations: {src: 'https://a'}}}]", false},
		{"generator options", "generatorOptions: {annotations: {src: 'https://a'}}", false},
		{"annotation selector", "patches: [{path: p.yaml, target: {annotationSelector: 'src=https://a'}}]", false},
		{"labels", "commonAnnotations: {source: 'https://github.com/org/repo'}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.remote, readsRemote([]byte(tc.data)))
		})
	}
}
