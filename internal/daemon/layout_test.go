package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// rootManifest is a root Application's manifest syncing path.
func rootManifest(name, path string) string {
	return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
		"spec: {source: {repoURL: https://git.example.com/deploy.git, path: " + path + "}}\n"
}

// layoutRepo is a Git work tree with a first commit holding files.
func layoutRepo(t *testing.T, files map[string]string) (string, *gitrepo.Repo) {
	t.Helper()
	dir := t.TempDir()
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	commitLayout(t, dir, files)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	return dir, repo
}

// commitLayout writes files (an empty content removes the file) and commits them; it returns the commit.
func commitLayout(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		if content == "" {
			require.NoError(t, os.Remove(filepath.Join(dir, name)))
			delete(files, name)
		}
	}
	gittest.WriteFiles(t, dir, files)
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "--allow-empty", "-m", "change")
	return gittest.Run(t, dir, "rev-parse", "HEAD")
}

// layoutDaemon is the part of a daemon that names the envs: cfg (validated) and the layout of repo.
func layoutDaemon(t *testing.T, cfg *Config, repo *gitrepo.Repo, log *bytes.Buffer) *Daemon {
	t.Helper()
	if cfg.Repo == "" {
		cfg.Repo = "/unused"
	}
	cfg.StateDir = t.TempDir()
	require.NoError(t, cfg.validate())
	d := newDaemon(cfg, nil, slog.New(slog.NewTextHandler(log, nil)))
	d.layout = newRepoLayout(func() *gitrepo.Repo { return repo }, d.log, cfg.byConvention)
	return d
}

func TestRepoLayoutFollowsTheBranchHead(t *testing.T) {
	dir, repo := layoutRepo(t, map[string]string{"clusters/prod/root.yaml": rootManifest("acme-root", "clusters/prod/apps")})
	var log bytes.Buffer
	d := layoutDaemon(t, &Config{Envs: []string{"prod", "stage"}, Roots: map[string]string{"stage": "stage-by-config"}}, repo, &log)
	var names audit.Config
	d.naming(&names)
	steps := []struct {
		name     string
		files    map[string]string // committed before the step (nil: no commit)
		root     string            // prod's root
		app      string            // prod's own Application
		manifest string            // prod's root manifest
		headErr  string            // in the head's layout error ("": none)
	}{
		{name: "no layout file: the config's names", root: "root-prod", app: "llm-prod", manifest: "clusters/prod/root.yaml"},
		{name: "the file is committed: its root", files: map[string]string{".auditor.yaml": `envs:
  - {name: prod, root: acme-root, rootManifest: clusters/prod/root.yaml}
  - {name: stage, root: stage-by-file}
`}, root: "acme-root", manifest: "clusters/prod/root.yaml"},
		{name: "the root renamed and moved", files: map[string]string{
			".auditor.yaml":           "envs:\n  - {name: prod, root: acme-main, rootManifest: clusters/prod/main.yaml}\n",
			"clusters/prod/main.yaml": rootManifest("acme-main", "clusters/prod/apps"),
		}, root: "acme-main", manifest: "clusters/prod/main.yaml"},
		{name: "the root manifest removed: the last good layout holds", files: map[string]string{"clusters/prod/main.yaml": ""},
			root: "acme-main", manifest: "clusters/prod/main.yaml", headErr: "does not parse: .auditor.yaml: env prod: rootManifest: clusters/prod/main.yaml"},
		{name: "a commit that leaves the file alone: still not used", files: map[string]string{"README.md": "acme\n"},
			root: "acme-main", manifest: "clusters/prod/main.yaml", headErr: "rootManifest"},
		{name: "mended", files: map[string]string{".auditor.yaml": "envs:\n  - {name: prod, selector: team=web}\n"},
			root: "", manifest: ""},
		{name: "the file removed: the config's names again", files: map[string]string{".auditor.yaml": ""},
			root: "root-prod", app: "llm-prod", manifest: "clusters/prod/root.yaml"},
	}
	for _, st := range steps {
		head := ""
		if st.files != nil {
			head = commitLayout(t, dir, st.files)
		}
		log.Reset()
		d.layout.refresh()
		d.layout.refresh() // the same head: read once, said once
		assert.Equal(t, st.root, names.RootName("prod"), st.name)
		assert.Equal(t, st.app, names.AppName("prod"), st.name)
		assert.Equal(t, st.manifest, names.RootManifest("prod"), st.name)
		assert.Equal(t, "stage-by-config", names.RootName("stage"), "%s: the config's roots win", st.name)
		assert.Empty(t, names.AppName("stage"), st.name)
		assert.NoError(t, d.layout.failing(), "%s: a good layout is known", st.name)
		if st.headErr == "" {
			assert.NoError(t, d.layout.headErr(), st.name)
			assert.NotContains(t, log.String(), "not used", st.name)
			continue
		}
		if assert.Error(t, d.layout.headErr(), st.name) {
			assert.Contains(t, d.layout.headErr().Error(), st.headErr, st.name)
			assert.Contains(t, d.layout.headErr().Error(), "the layout at "+gitrepo.Short(head), st.name)
		}
		assert.Equal(t, 1, strings.Count(log.String(), "the repository's layout is not used"), "%s: logged once per commit:\n%s", st.name, log.String())
		assert.Contains(t, log.String(), "the one at ", st.name)
	}
	sel := names.Select("prod")
	assert.Nil(t, sel, "the file removed: no selection")
}

func TestRepoLayoutConventionIsNamedByTheConfig(t *testing.T) {
	for _, file := range []string{"", "profile: llm-platform\n"} {
		files := map[string]string{"overlays/prod/kustomization.yaml": "resources: []\n", "overlays/staging/kustomization.yaml": "resources: []\n"}
		if file != "" {
			files[".auditor.yaml"] = file
		}
		_, repo := layoutRepo(t, files)
		var log bytes.Buffer
		d := layoutDaemon(t, &Config{Envs: []string{"prod"}, RootNamePrefix: ptr.To("acme-"), AppNamePrefix: ptr.To("")}, repo, &log)
		require.NoError(t, d.startLayout())
		assert.Equal(t, "argocd", d.appNamespace())
		l := d.layout.current()
		require.NotNil(t, l)
		assert.Equal(t, []string{"prod", "staging"}, l.Names(), "%q: the overlays' envs are the cluster's", file)
		var names audit.Config
		d.naming(&names)
		assert.Equal(t, "acme-staging", names.RootName("staging"), "%q: named by the config", file)
		assert.Equal(t, "prod", names.AppName("prod"), file)
		assert.Equal(t, "clusters/prod/root.yaml", names.RootManifest("prod"), file)
	}
}

func TestRepoLayoutMovedAsksForFullAudits(t *testing.T) {
	dir, repo := layoutRepo(t, map[string]string{".auditor.yaml": "envs:\n  - {name: prod, root: a}\n"})
	var log bytes.Buffer
	d := layoutDaemon(t, &Config{Envs: []string{"prod", "stage"}}, repo, &log)
	d.layout.refresh()
	assert.True(t, d.layout.moved("prod"), "the first audit")
	assert.True(t, d.layout.moved("stage"), "the first audit")
	assert.False(t, d.layout.moved("prod"))
	commitLayout(t, dir, map[string]string{"README.md": "x\n"})
	d.layout.refresh()
	assert.False(t, d.layout.moved("prod"), "another commit, the same layout")
	commitLayout(t, dir, map[string]string{".auditor.yaml": "envs:\n  - {name: prod, root: b}\n"})
	d.layout.refresh()
	assert.True(t, d.layout.moved("prod"), "a new root")
	assert.True(t, d.layout.moved("stage"), "each env is told")
	assert.False(t, d.layout.moved("prod"))
}

func TestRepoLayoutNeverGoodFailsTheAudits(t *testing.T) {
	dir, repo := layoutRepo(t, map[string]string{
		".auditor.yaml": "envs:\n  - {name: prod, root: acme-root, rootManifest: clusters/prod/root.yaml}\n"})
	var log bytes.Buffer
	d := layoutDaemon(t, &Config{Envs: []string{"prod"}}, repo, &log)
	d.layout.refresh()
	err := d.layout.failing()
	require.Error(t, err, "no layout parsed yet: the audits fail instead of auditing root-prod")
	head := gittest.Run(t, dir, "rev-parse", "HEAD")
	assert.Contains(t, err.Error(), "the layout at "+gitrepo.Short(head)+" does not parse")
	assert.Contains(t, err.Error(), "rootManifest")
	assert.Contains(t, log.String(), "none: the envs' audits fail")
	assert.Nil(t, d.layout.current())

	commitLayout(t, dir, map[string]string{"clusters/prod/root.yaml": rootManifest("acme-root", "clusters/prod/apps")})
	d.layout.refresh()
	assert.NoError(t, d.layout.failing())
	var names audit.Config
	d.naming(&names)
	assert.Equal(t, "acme-root", names.RootName("prod"))
}

func TestAppNamespaceFromTheLayout(t *testing.T) {
	two := &layout.Layout{File: layout.LayoutFile, Envs: []layout.Env{
		{Name: "prod", Namespace: "acme-cd", Root: "acme-root"},
		{Name: "staging", Namespace: "argocd", Root: "acme-staging"},
		{Name: "dev", Namespace: "acme-cd", Root: "acme-dev"},
	}}
	for _, tc := range []struct {
		name         string
		envs         []string
		appNamespace string
		layout       *layout.Layout
		want, err    string
	}{
		{name: "no layout", envs: []string{"prod"}, layout: nil, want: "argocd"},
		{name: "the layout's namespace", envs: []string{"prod"}, layout: two, want: "acme-cd"},
		{name: "every env audited in one", envs: []string{"prod", "dev"}, layout: two, want: "acme-cd"},
		{name: "an env the layout does not list follows", envs: []string{"prod", "qa"}, layout: two, want: "acme-cd"},
		{name: "none of the envs listed", envs: []string{"qa"}, layout: two, want: "argocd"},
		{name: "the config's appNamespace wins", envs: []string{"prod", "staging"}, appNamespace: "gitops", layout: two, want: "gitops"},
		{name: "two namespaces", envs: []string{"prod", "staging", "dev"}, layout: two,
			err: ".auditor.yaml puts the envs' root Applications in different namespaces (dev, prod in acme-cd; staging in argocd), and one audit reads Applications in one namespace: run one daemon per namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{Repo: "/r", StateDir: "/s", Envs: tc.envs, AppNamespace: tc.appNamespace}
			require.NoError(t, c.validate())
			got, err := c.appNamespaceFor(tc.layout)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDaemonTakesTheLayoutsNamespace(t *testing.T) {
	file := func(prodNS, stagingNS string) map[string]string {
		return map[string]string{".auditor.yaml": "envs:\n  - {name: prod, root: acme-root, namespace: " + prodNS + "}\n" +
			"  - {name: staging, root: acme-staging, namespace: " + stagingNS + "}\n"}
	}
	t.Run("one namespace: the audits' and the watch's, for the daemon's lifetime", func(t *testing.T) {
		dir, repo := layoutRepo(t, file("acme-cd", "acme-cd"))
		var log bytes.Buffer
		d := layoutDaemon(t, &Config{Envs: []string{"prod", "staging"}}, repo, &log)
		require.NoError(t, d.startLayout())
		assert.Equal(t, "acme-cd", d.appNamespace())
		var names audit.Config
		d.naming(&names)
		commitLayout(t, dir, file("acme-ops", "acme-ops"))
		d.layout.refresh()
		if assert.Error(t, d.layout.headErr()) {
			assert.Contains(t, d.layout.headErr().Error(), "is not used: its envs' Applications are in acme-ops, and the daemon reads them in acme-cd since it started: restart it")
		}
		assert.Equal(t, "acme-root", names.RootName("prod"), "the last good layout")
	})
	t.Run("the config's appNamespace wins", func(t *testing.T) {
		_, repo := layoutRepo(t, file("acme-cd", "argocd"))
		var log bytes.Buffer
		d := layoutDaemon(t, &Config{Envs: []string{"prod", "staging"}, AppNamespace: "gitops"}, repo, &log)
		require.NoError(t, d.startLayout())
		assert.Equal(t, "gitops", d.appNamespace())
		assert.Contains(t, log.String(), "argocdNamespace wins over the layout's namespace")
	})
	t.Run("a selection outside the layout's namespace", func(t *testing.T) {
		_, repo := layoutRepo(t, file("acme-cd", "acme-cd"))
		var log bytes.Buffer
		d := layoutDaemon(t, &Config{Envs: []string{"prod", "staging"},
			Applications: map[string]AppSelectionConfig{"prod": {Namespaces: []string{"argocd"}, Projects: []string{"web"}}}}, repo, &log)
		err := d.startLayout()
		require.Error(t, err)
		assert.Contains(t, err.Error(), `applications.prod.namespaces: "argocd" is neither argocdNamespace (acme-cd, from the repository's layout) nor one of appNamespaces`)
	})
	t.Run("two namespaces: refused at start, without retries", func(t *testing.T) {
		dir, _ := layoutRepo(t, file("acme-cd", "argocd"))
		cfg := &Config{Repo: dir, Envs: []string{"prod", "staging"}, StateDir: t.TempDir(), API: APIConfig{Auth: APIAuthNone}, RenderInProcess: true}
		require.NoError(t, cfg.validate())
		d, err := New(cfg, &rest.Config{Host: "https://127.0.0.1:1"}, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
		require.NoError(t, err)
		err = d.connect(context.Background())
		require.ErrorIs(t, err, errRefused)
		assert.Contains(t, err.Error(), "prod in acme-cd; staging in argocd")
	})
}
