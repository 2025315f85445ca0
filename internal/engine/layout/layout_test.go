package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dirFiles reads a directory of the OS as Files.
type dirFiles string

func (d dirFiles) ReadFile(rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), filepath.FromSlash(rel)))
}

func (d dirFiles) ReadDir(rel string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(string(d), filepath.FromSlash(rel)))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}

// mapFiles is a repository of a few files.
type mapFiles map[string]string

func (m mapFiles) ReadFile(rel string) ([]byte, error) {
	if s, ok := m[rel]; ok {
		return []byte(s), nil
	}
	return nil, fs.ErrNotExist
}

func (m mapFiles) ReadDir(rel string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for p := range m {
		if rest, ok := strings.CutPrefix(p, rel+"/"); ok {
			name, _, _ := strings.Cut(rest, "/")
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	if len(out) == 0 {
		return nil, fs.ErrNotExist
	}
	return out, nil
}

func TestThisRepositoryFollowsTheConventionAndOptsIntoThePlatformRules(t *testing.T) {
	l, err := Read(dirFiles("../../.."))
	require.NoError(t, err)
	assert.Equal(t, []string{"dev", "prod", "staging"}, l.Names())
	assert.True(t, l.Platform())
	prod, ok := l.Env("prod")
	require.True(t, ok)
	assert.Empty(t, cmp.Diff(Env{Name: "prod", Namespace: "argocd", Root: "root-prod", RootManifest: "clusters/prod/root.yaml",
		Apps: "apps/prod", Application: "llm-prod", Overlay: "overlays/prod"}, prod))
}

func TestAnotherLayoutNamesItsRootAndTheRootManifestGivesThePath(t *testing.T) {
	l, err := Read(dirFiles("testdata/acme"))
	require.NoError(t, err)
	assert.False(t, l.Platform(), "no profile: the generic rules alone")
	assert.Empty(t, cmp.Diff([]Env{{Name: "prod", Namespace: "argocd", Root: "acme-root", RootManifest: "clusters/prod/root.yaml",
		Apps: "clusters/prod/apps"}}, l.Envs))
	assert.Equal(t, LayoutFile, l.Describe())
}

func TestRead(t *testing.T) {
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
	for _, tc := range []struct {
		name    string
		files   mapFiles
		envs    []string
		off     map[string]string // rule@env → reason
		apps    map[string]string // env → the path its root syncs
		wantErr string
	}{
		{name: "no file, no overlays: no envs, no error", files: mapFiles{"README.md": "hi"}},
		{name: "no file: the overlays with a kustomization", files: mapFiles{
			"overlays/b/kustomization.yaml": overlay, "overlays/a/kustomization.yaml": overlay, "overlays/c/notes.md": "x"},
			envs: []string{"a", "b"}},
		{name: "a file without envs keeps the convention's", files: mapFiles{
			LayoutFile: "profile: llm-platform\n", "overlays/a/kustomization.yaml": overlay}, envs: []string{"a"}},
		{name: "envs by selection", files: mapFiles{
			LayoutFile: "envs:\n- name: qa\n  projects: [web]\n- name: ops\n  selector: team=ops\n"}, envs: []string{"qa", "ops"}},
		{name: "rules off with reasons", files: mapFiles{
			LayoutFile: "envs:\n- {name: prod, root: r, apps: x}\n- {name: dev, root: d, apps: y}\n" +
				"rules:\n- {name: first-sync, reason: we sync by hand}\n- {name: refs-resolve, envs: [dev], reason: dev is a sandbox}\n"},
			envs: []string{"prod", "dev"},
			off:  map[string]string{"first-sync@prod": "we sync by hand", "first-sync@dev": "we sync by hand", "refs-resolve@dev": "dev is a sandbox", "refs-resolve@prod": ""}},
		{name: "unknown key", files: mapFiles{LayoutFile: "envs:\n- name: prod\n  rot: r\n"}, wantErr: "line 3: field rot not found"},
		{name: "env named by nothing", files: mapFiles{LayoutFile: "envs:\n- name: prod\n"}, wantErr: "envs[0] (prod): say how its Applications are found"},
		{name: "env twice", files: mapFiles{LayoutFile: "envs:\n- {name: a, root: r}\n- {name: a, root: s}\n"}, wantErr: `env "a" is listed twice`},
		{name: "bad selector", files: mapFiles{LayoutFile: "envs:\n- {name: a, selector: 'a in (b'}\n"}, wantErr: "envs[0] (a): selector"},
		{name: "rule without reason", files: mapFiles{LayoutFile: "rules:\n- name: first-sync\n"}, wantErr: "rules[0] (first-sync): reason is required"},
		{name: "rule of an unknown env", files: mapFiles{LayoutFile: "envs:\n- {name: a, root: r}\nrules:\n- {name: x, envs: [b], reason: r}\n"}, wantErr: `env "b" is not one of the envs`},
		{name: "unknown profile", files: mapFiles{LayoutFile: "profile: acme\n"}, wantErr: `profile "acme"`},
		{name: "root manifest missing", files: mapFiles{LayoutFile: "envs:\n- {name: a, root: r, rootManifest: clusters/a.yaml}\n"}, wantErr: "env a: rootManifest"},
		{name: "root manifest of no Application", files: mapFiles{LayoutFile: "envs:\n- {name: a, root: r, rootManifest: m.yaml}\n",
			"m.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"}, wantErr: "m.yaml: no Application r in the file"},
		{name: "root manifest of several documents: the root's", files: mapFiles{
			LayoutFile: "envs:\n- {name: prod, root: acme-prod, rootManifest: roots.yaml}\n",
			"roots.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: acme}\n---\n" +
				"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: acme-staging}\nspec: {source: {path: staging/apps}}\n---\n" +
				"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: acme-prod}\nspec: {source: {path: ./prod/apps}}\n"},
			envs: []string{"prod"}, apps: map[string]string{"prod": "prod/apps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Read(tc.files)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.envs, l.Names())
			for env, want := range tc.apps {
				e, _ := l.Env(env)
				assert.Equal(t, want, e.Apps, env)
			}
			for k, want := range tc.off {
				rule, env, _ := strings.Cut(k, "@")
				assert.Equal(t, want, l.Off(rule, env), k)
			}
		})
	}
}
