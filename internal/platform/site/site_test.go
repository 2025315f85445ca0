package site

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// repoCopy copies what an env's render reads (and its bootstrap Application) to a temporary
// directory.
func repoCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, gittest.ReadTree(t, "../../..", "base", "components", "overlays", "apps", "clusters"))
	return dir
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, rel))
	require.NoError(t, err)
	return string(data)
}

// changedLines lists the lines of after that before does not have at the same place, for files
// whose edits replace or insert lines.
func changedLines(before, after string) (removed, added []string) {
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	seen := map[string]int{}
	for _, l := range b {
		seen[l]++
	}
	for _, l := range a {
		if seen[l] > 0 {
			seen[l]--
			continue
		}
		added = append(added, strings.TrimSpace(l))
	}
	seenA := map[string]int{}
	for _, l := range a {
		seenA[l]++
	}
	for _, l := range b {
		if seenA[l] > 0 {
			seenA[l]--
			continue
		}
		removed = append(removed, strings.TrimSpace(l))
	}
	return removed, added
}

// acme are a real site's values for every key.
var acme = map[string]string{
	"gitURL":      "https://git.acme.io/ml/platform.git",
	"gitWebURL":   "https://git.acme.io/ml/platform/-/blob/main",
	"domain":      "llm.acme.io",
	"issuer":      "acme-ca",
	"secretStore": "vault",
	"argocdURL":   "https://cd.acme.io",
	"registry":    "ghcr.io/acme/ml",
	"nodeRole":    "KarpenterNodeRole-acme-prod",
	"clusterName": "acme-prod",
	// An air-gapped site: the GPU Operator chart from its own mirror.
	"nvidiaCharts": "https://charts.acme.io/nvidia",
}

// TestSetEveryKeyLeavesNoExample sets every key of prod and renders what Argo CD would apply:
// the overlay, the app-of-apps, and the bootstrap Application. None carries an example name any
// more, each value is where the platform uses it, and the images keep the overlay's tags.
func TestSetEveryKeyLeavesNoExample(t *testing.T) {
	dir := repoCopy(t)
	before, err := render.FromDir(dir)
	require.NoError(t, err)
	res, err := render.Engine{}.Render(context.Background(), before, render.Target{Name: "prod"})
	require.NoError(t, err)
	assert.NotEmpty(t, examplesIn(res.Objects), "the template's render has examples to remove")

	changes, err := Set(dir, "prod", acme)
	require.NoError(t, err)
	files := map[string]bool{}
	for _, c := range changes {
		files[c.File] = true
	}
	assert.Equal(t, map[string]bool{"overlays/prod/site/site.yaml": true, "clusters/prod/root.yaml": true, "overlays/prod/kustomization.yaml": true}, files)

	src, err := render.FromDir(dir)
	require.NoError(t, err)
	ov, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	require.NoError(t, err)
	apps, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: render.AppTarget("apps/prod")})
	require.NoError(t, err)
	assert.Empty(t, examplesIn(ov.Objects), "overlays/prod")
	assert.Empty(t, examplesIn(apps.Objects), "apps/prod")
	assert.Empty(t, Examples(read(t, dir, "clusters/prod/root.yaml")), "clusters/prod/root.yaml")

	byName := map[string]*unstructured.Unstructured{}
	for _, o := range append(ov.Objects, apps.Objects...) {
		byName[o.GetKind()+" "+o.GetName()] = o
	}
	get := func(obj string, fields ...any) any {
		o := byName[obj]
		require.NotNil(t, o, obj)
		var v any = o.Object
		for _, f := range fields {
			switch f := f.(type) {
			case string:
				v = v.(map[string]any)[f]
			case int:
				v = v.([]any)[f]
			}
		}
		return v
	}
	assert.Equal(t, "https://git.acme.io/ml/platform.git", get("Application llm-prod", "spec", "source", "repoURL"))
	assert.Equal(t, "https://git.acme.io/ml/platform.git", get("AppProject llm-prod", "spec", "sourceRepos", 0))
	assert.Equal(t, "https://charts.acme.io/nvidia", get("Application gpu-operator", "spec", "source", "repoURL"), "the chart from the site's mirror")
	assert.Equal(t, "https://charts.acme.io/nvidia", get("AppProject gpu-stack", "spec", "sourceRepos", 0), "the project allows the mirror")
	assert.Equal(t, "llm.acme.io", get("Certificate llm-gateway-tls", "spec", "dnsNames", 0))
	assert.Equal(t, "acme-ca", get("Certificate llm-gateway-tls", "spec", "issuerRef", "name"))
	assert.Equal(t, "vault", get("ExternalSecret pgvector-rag", "spec", "secretStoreRef", "name"))
	assert.Equal(t, "KarpenterNodeRole-acme-prod", get("EC2NodeClass gpu", "spec", "role"))
	assert.Equal(t, "ghcr.io/acme/ml/rag-api:1.4.2", get("Deployment rag-api", "spec", "template", "spec", "containers", 0, "image"), "the overlay's tag stays")
	env := map[string]any{}
	for _, e := range get("StatefulSet auditor", "spec", "template", "spec", "containers", 0, "env").([]any) {
		env[e.(map[string]any)["name"].(string)] = e.(map[string]any)["value"]
	}
	assert.Equal(t, "https://git.acme.io/ml/platform.git", env["AUDITOR_REPO"])
	assert.Equal(t, "https://cd.acme.io", env["ARGOCD_URL"])

	// Setting the same values again changes nothing.
	again, err := Set(dir, "prod", acme)
	require.NoError(t, err)
	assert.Empty(t, again)
	// Other envs are untouched.
	assert.Equal(t, read(t, "../../..", "overlays/staging/site/site.yaml"), read(t, dir, "overlays/staging/site/site.yaml"))
}

func examplesIn(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, f := range ExamplesIn(objs, nil) {
		out = append(out, f.Object()+": "+f.Example)
	}
	return out
}

// TestSetEditsOnlyTheValues: the diff of each file is the values and the template mark, with
// comments and quoting kept.
func TestSetEditsOnlyTheValues(t *testing.T) {
	dir := repoCopy(t)
	files := []string{"overlays/staging/site/site.yaml", "clusters/staging/root.yaml", "overlays/staging/kustomization.yaml"}
	before := map[string]string{}
	for _, f := range files {
		before[f] = read(t, dir, f)
	}
	_, err := Set(dir, "staging", map[string]string{"gitURL": "git@git.acme.io:ml/platform.git", "registry": "registry.acme.io:5000/ml", "domain": "llm.staging.acme.io"})
	require.NoError(t, err)
	type diff struct{ Removed, Added []string }
	got := map[string]diff{}
	for _, f := range files {
		r, a := changedLines(before[f], read(t, dir, f))
		got[f] = diff{r, a}
	}
	want := map[string]diff{
		"overlays/staging/site/site.yaml": {
			Removed: []string{
				`platform.llm/template: "true" # auditor site set removes it: the examples are then errors`,
				"gitURL: https://git.example.com/platform/llm-gitops.git # Argo CD's source and the auditor's repo",
				"domain: llm.staging.example.com # the Gateway's https hostname and its certificate",
				"registry: registry.example.com/llm # the platform's own images: rag-api, batch, auditor",
			},
			Added: []string{
				"gitURL: git@git.acme.io:ml/platform.git # Argo CD's source and the auditor's repo",
				"domain: llm.staging.acme.io # the Gateway's https hostname and its certificate",
				"registry: registry.acme.io:5000/ml # the platform's own images: rag-api, batch, auditor",
			},
		},
		"clusters/staging/root.yaml": {
			Removed: []string{"repoURL: https://git.example.com/platform/llm-gitops.git"},
			Added:   []string{"repoURL: git@git.acme.io:ml/platform.git"},
		},
		"overlays/staging/kustomization.yaml": {
			Added: []string{
				"newName: registry.acme.io:5000/ml/rag-api",
				"newName: registry.acme.io:5000/ml/reindexer",
				"newName: registry.acme.io:5000/ml/transcriber",
				"newName: registry.acme.io:5000/ml/auditor",
			},
		},
	}
	assert.Empty(t, cmp.Diff(want, got))

	// A second registry moves the names set by the first.
	_, err = Set(dir, "staging", map[string]string{"registry": "ghcr.io/acme"})
	require.NoError(t, err)
	_, added := changedLines(before["overlays/staging/kustomization.yaml"], read(t, dir, "overlays/staging/kustomization.yaml"))
	assert.Equal(t, []string{"newName: ghcr.io/acme/rag-api", "newName: ghcr.io/acme/reindexer", "newName: ghcr.io/acme/transcriber", "newName: ghcr.io/acme/auditor"}, added)
}

func TestSetRefusesBadInput(t *testing.T) {
	cases := []struct {
		name  string
		pairs map[string]string
		want  string
	}{
		{"unknown key", map[string]string{"gitUrl": "https://x/y.git"}, `unknown site key "gitUrl" (known: gitURL, gitWebURL`},
		{"not a URL", map[string]string{"gitURL": "git.acme.io/platform"}, "gitURL: \"git.acme.io/platform\" is not a Git URL"},
		{"a file URL without a path", map[string]string{"gitURL": "file://"}, "is not a Git URL"},
		{"not a DNS name", map[string]string{"domain": "https://llm.acme.io"}, `domain: "https://llm.acme.io" is not a DNS name`},
		{"a tag on the registry", map[string]string{"registry": "ghcr.io/acme:1.0"}, "is not a registry and path"},
		{"a trailing slash", map[string]string{"gitWebURL": "https://git.acme.io/ml/-/blob/main/"}, "no trailing slash"},
		{"a line break", map[string]string{"issuer": "acme\nca"}, "spaces or line breaks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := repoCopy(t)
			before := read(t, dir, "overlays/prod/site/site.yaml")
			_, err := Set(dir, "prod", tc.pairs)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, before, read(t, dir, "overlays/prod/site/site.yaml"), "nothing written")
		})
	}
	_, err := Set(t.TempDir(), "qa", map[string]string{"domain": "llm.acme.io"})
	assert.ErrorContains(t, err, "overlays/qa/site/site.yaml")
}

func TestExamples(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"https://git.example.com/platform/llm-gitops.git", []string{"git.example.com"}},
		{"registry.example.com/llm/rag-api:1.4.2", []string{"registry.example.com"}},
		{"llm.staging.example.com", []string{"llm.staging.example.com"}},
		{"a@Example.ORG and b.example.net", []string{"b.example.net", "example.org"}},
		{"db.corp.example", nil},
		{"a.example.com,b.example.com", []string{"a.example.com", "b.example.com"}},
		{"https://llm.acme.io", nil},
		{"notexample.com and example.community", nil},
		{"myexample.com", nil},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Examples(tc.in), tc.in)
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"https://x.io/a.git": "https://x.io/a.git",
		"git@x.io:a/b.git":   "git@x.io:a/b.git",
		"true":               `"true"`,
		"a #b":               `"a #b"`,
		"5000":               `"5000"`,
		"x: y":               `"x: y"`,
	} {
		assert.Equal(t, want, quote(in), in)
	}
}

// TestExamplesInNamesTheKey: each example a rendered object carries is named once per object,
// with the site key whose value put it there; a name written in a manifest has no key.
func TestExamplesInNamesTheKey(t *testing.T) {
	src, err := render.FromDir("../../..")
	require.NoError(t, err)
	data, err := src.ReadFile(Path("prod"))
	require.NoError(t, err)
	v, err := Parse("prod", data)
	require.NoError(t, err)
	assert.True(t, v.Template)
	assert.Empty(t, v.Problems(), "the template's values are well formed")
	assert.Equal(t, []string{"gitURL", "gitWebURL", "domain", "argocdURL", "registry"}, v.ExampleKeys())

	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
	require.NoError(t, err)
	byObject := map[string]Found{}
	for _, f := range ExamplesIn(res.Objects, v) {
		_, dup := byObject[f.Object()+" "+f.Example]
		assert.False(t, dup, "once per object: %v", f)
		byObject[f.Object()+" "+f.Example] = f
	}
	cert := byObject["Certificate llm-inference/llm-gateway-tls llm.example.com"]
	assert.Equal(t, "domain", cert.Key, "%v", byObject)
	api := byObject["Deployment llm-api/rag-api registry.example.com"]
	assert.Equal(t, "registry", api.Key, "%v", byObject)

	manual := ExamplesIn([]*unstructured.Unstructured{{Object: map[string]any{
		"kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "y"},
		"data": map[string]any{"url": "https://docs.example.org/a", "again": "docs.example.org"},
	}}}, v)
	assert.Equal(t, []Found{{Kind: "ConfigMap", Namespace: "y", Name: "x", Example: "docs.example.org"}}, manual)
}

func TestProblems(t *testing.T) {
	v := &Values{Values: map[string]string{}}
	for k, val := range acme {
		v.Values[k] = val
	}
	assert.Empty(t, v.Problems())
	delete(v.Values, "issuer")
	v.Values["domain"] = "https://llm.acme.io"
	v.Values["regsitry"] = "x"
	assert.Equal(t, []string{
		`domain: "https://llm.acme.io" is not a DNS name (label "https://llm")`,
		"issuer: not set (the cert-manager ClusterIssuer that signs the Gateway's certificate)",
		"regsitry: not a site key (known: gitURL, gitWebURL, domain, issuer, secretStore, argocdURL, registry, nodeRole, clusterName, nvidiaCharts)",
	}, v.Problems())
}

// TestSetFillsAnEmptyValue: a key present without a value ("domain:") gets one, and a Git URL
// carrying a password is refused before anything is written.
func TestSetFillsAnEmptyValue(t *testing.T) {
	dir := repoCopy(t)
	file := filepath.Join(dir, "overlays/dev/site/site.yaml")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	emptied := strings.Replace(string(data), "domain: llm.dev.example.com #", "domain: #", 1)
	emptied = strings.Replace(emptied, "issuer: platform #", "issuer:\n  #", 1)
	require.NotEqual(t, string(data), emptied)
	require.NoError(t, os.WriteFile(file, []byte(emptied), 0o644))

	_, err = Set(dir, "dev", map[string]string{"issuer": "acme-ca"})
	require.NoError(t, err)
	v, err := Parse("dev", []byte(read(t, dir, "overlays/dev/site/site.yaml")))
	require.NoError(t, err)
	assert.Equal(t, "acme-ca", v.Values["issuer"])

	_, err = Set(dir, "dev", map[string]string{"gitURL": "https://bot:s3cret@git.acme.io/ml/platform.git"})
	require.ErrorContains(t, err, "carries a password")
	assert.NotContains(t, err.Error(), "s3cret")
	info, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), "the file keeps its mode")
}

func TestGitURLs(t *testing.T) {
	key, ok := Lookup("gitURL")
	require.True(t, ok)
	for _, good := range []string{"https://git.acme.io/ml/platform.git", "ssh://git@git.acme.io/ml/platform.git", "git@git.acme.io:ml/platform.git", "file:///tmp/demo/git/platform.git"} {
		assert.NoError(t, key.Check(good), good)
	}
	for _, bad := range []string{"git.acme.io/ml/platform", "ftp://git.acme.io/x.git", "https:///x.git", "https://u:p@git.acme.io/x.git"} {
		assert.Error(t, key.Check(bad), bad)
	}
}
