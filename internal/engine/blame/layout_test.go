package blame

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// acmeHistory is a team's own repository of another layout (internal/engine/layout/testdata/acme: a
// root acme-root over clusters/prod/apps, a Kustomize service under services/web/prod, a Helm
// chart under charts/worker; no overlays/) committed, then changed over several commits. The
// returned hashes are by commit name.
func acmeHistory(t *testing.T) (dir string, commits map[string]string) {
	t.Helper()
	dir = t.TempDir()
	gittest.WriteFiles(t, dir, gittest.ReadTree(t, "../layout/testdata/acme", "."))
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	commits = map[string]string{}
	commit := func(name, msg string, files map[string]string) {
		gittest.WriteFiles(t, dir, files)
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", msg)
		commits[name] = strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	}
	commit("acme", "acme", nil)
	web := func(n string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: " + n + "\n"
	}
	worker := func(n string) string { return "replicas: " + n + "\nqueue: jobs-prod\n" }
	commit("web4", "web: 4 replicas", map[string]string{"services/web/prod/replicas.yaml": web("4")})
	commit("worker5", "worker: 5 replicas in prod", map[string]string{"charts/worker/values-prod.yaml": worker("5")})
	commit("docs", "docs only", map[string]string{"README.md": "acme\n"})
	commit("web6", "web: 6 replicas", map[string]string{"services/web/prod/replicas.yaml": web("6")})
	commit("worker3", "worker: 3 replicas in prod", map[string]string{"charts/worker/values-prod.yaml": worker("3")})
	return dir, commits
}

// fieldCommits names, for each of paths, the commit blame gives it (by the name acmeHistory
// gave the commit).
func fieldCommits(t *testing.T, b *Blame, commits map[string]string, paths ...string) map[string]string {
	t.Helper()
	name := map[string]string{}
	for k, v := range commits {
		name[v] = k
	}
	got := map[string]string{}
	for _, f := range b.Fields {
		for _, p := range paths {
			if f.Path == p {
				require.NotNil(t, f.Commit, f.Path)
				got[p] = name[f.Commit.SHA]
			}
		}
	}
	return got
}

// TestGitWalksTheApplicationsOfAnEnvWithoutOverlay: an env .auditor.yaml lists (no overlays/) is
// walked in the path of the Application that renders the object, found among those its root
// syncs: the Kustomize service's replicas come from the commit of services/web/prod/replicas.yaml,
// the chart's from the commit of charts/worker/values-prod.yaml (rendered with the
// Application's value files), and what neither changed from the commit that added them.
func TestGitWalksTheApplicationsOfAnEnvWithoutOverlay(t *testing.T) {
	dir, c := acmeHistory(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	cases := []struct {
		name        string
		ref         Ref
		application string
		path        string
		object      Object
		want        map[string]string // field path → commit name
		values      map[string]any    // field path → value at the head
	}{
		{"a Kustomize service", Ref{Kind: "Deployment", Namespace: "acme-web", Name: "web"}, "acme-web", "services/web/prod",
			Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "acme-web", Name: "web"},
			map[string]string{".spec.replicas": "web6", ".spec.template.spec.containers[name=web].image": "acme", ".metadata.name": "acme"},
			map[string]any{".spec.replicas": int64(6), ".spec.template.spec.containers[name=web].image": "registry.example.com/acme/web:1.4.2"}},
		{"a Helm chart with the Application's value files", Ref{Kind: "deployment", Namespace: "acme-worker", Name: "acme-worker"}, "acme-worker", "charts/worker",
			Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "acme-worker", Name: "acme-worker"},
			map[string]string{".spec.replicas": "worker3", ".spec.template.spec.containers[name=worker].args": "acme", ".metadata.name": "acme"},
			map[string]any{".spec.replicas": int64(3), ".spec.template.spec.containers[name=worker].args": []any{"--queue", "jobs-prod"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Git(context.Background(), repo, Request{Env: "prod", Object: tc.ref}, Options{})
			require.NoError(t, err)
			assert.Equal(t, tc.application, b.Application)
			assert.Equal(t, tc.path, b.Path)
			assert.Equal(t, tc.object, b.Object)
			assert.Equal(t, c["worker3"], b.Revision)
			assert.True(t, b.History.Complete, "the walk reached the commit that added it")
			assert.Empty(t, b.History.Skipped)
			paths := make([]string, 0, len(tc.want))
			for p := range tc.want {
				paths = append(paths, p)
			}
			if d := cmp.Diff(tc.want, fieldCommits(t, b, c, paths...)); d != "" {
				t.Errorf("commits per field (-want +got):\n%s", d)
			}
			values := map[string]any{}
			for _, f := range b.Fields {
				if _, ok := tc.values[f.Path]; ok {
					values[f.Path] = f.Git
				}
			}
			if d := cmp.Diff(tc.values, values); d != "" {
				t.Errorf("values (-want +got):\n%s", d)
			}
		})
	}

	// From an older revision: the values then, and the commits that had set them.
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "deployment", Name: "acme-worker"}, Revision: c["docs"]}, Options{})
	require.NoError(t, err)
	if d := cmp.Diff(map[string]string{".spec.replicas": "worker5"}, fieldCommits(t, b, c, ".spec.replicas")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	b, err = Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "deployment", Name: "web"}, Revision: c["docs"]}, Options{})
	require.NoError(t, err)
	if d := cmp.Diff(map[string]string{".spec.replicas": "web4"}, fieldCommits(t, b, c, ".spec.replicas")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestGitWalksTheOverlayOfAListedEnvAsItsApplications: an env the layout file lists is walked in
// its Applications even where their path is an overlays/<env> (the convention's shape, named in
// .auditor.yaml): the object is blamed in the path of the Application that renders it.
func TestGitWalksTheOverlayOfAListedEnvAsItsApplications(t *testing.T) {
	dir, c := history(t)
	gittest.WriteFiles(t, dir, map[string]string{
		".auditor.yaml":                "envs:\n  - name: prod\n    root: root-prod\n    rootManifest: clusters/prod/root.yaml\n",
		"clusters/prod/root.yaml":      "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: root-prod, namespace: argocd}\nspec:\n  project: default\n  source: {repoURL: https://git.example.com/platform.git, targetRevision: main, path: apps/prod}\n  destination: {server: https://kubernetes.default.svc, namespace: argocd}\n",
		"apps/prod/kustomization.yaml": "resources: [llm-prod.yaml]\n",
		"apps/prod/llm-prod.yaml":      "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: llm-prod, namespace: argocd}\nspec:\n  project: default\n  source: {repoURL: https://git.example.com/platform.git, targetRevision: main, path: overlays/prod}\n  destination: {server: https://kubernetes.default.svc, namespace: inference}\n",
	})
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "the auditor's layout")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "deployment", Name: "vllm"}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "llm-prod", b.Application)
	assert.Equal(t, "overlays/prod", b.Path)
	if d := cmp.Diff(map[string]string{".spec.replicas": "c5", ".spec.template.spec.containers[name=vllm].image": "c2", ".metadata.name": "c1"},
		fieldCommits(t, b, c, ".spec.replicas", ".spec.template.spec.containers[name=vllm].image", ".metadata.name")); d != "" {
		t.Errorf("commits per field (-want +got):\n%s", d)
	}
	require.Len(t, b.History.Skipped, 1, "the broken overlay")
	assert.Equal(t, c["c4"], b.History.Skipped[0].Commit)
}

// TestGitNamesTheApplicationsOfAnEnvThatDeclaresNoSuchObject: an object no Application of the
// env renders is a NotDeclaredError naming the env's Applications and their paths.
func TestGitNamesTheApplicationsOfAnEnvThatDeclaresNoSuchObject(t *testing.T) {
	dir, c := acmeHistory(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	_, err = Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Namespace: "acme-web", Name: "nope"}}, Options{})
	var nd *NotDeclaredError
	require.True(t, errors.As(err, &nd), "%v", err)
	assert.Equal(t, []string{"acme-web (services/web/prod)", "acme-worker (charts/worker)"}, nd.Applications)
	assert.Empty(t, nd.Candidates)
	assert.Equal(t, "Deployment acme-web/nope is not declared in env prod at "+c["worker3"][:12]+
		": none of the env's Applications renders it (acme-web (services/web/prod), acme-worker (charts/worker))", err.Error())
	assert.NotContains(t, err.Error(), "overlay")
}

// TestGitFollowsAnAppOfAppsUnderTheRoot: an Application the root syncs may itself declare
// Applications (an app-of-apps); the object of one of those is walked in its path.
func TestGitFollowsAnAppOfAppsUnderTheRoot(t *testing.T) {
	dir, _ := acmeHistory(t)
	app := func(name, p, ns string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\nspec:\n  project: default\n" +
			"  source: {repoURL: REPO_URL, targetRevision: main, path: " + p + "}\n  destination: {server: https://kubernetes.default.svc, namespace: " + ns + "}\n"
	}
	gate := func(mode string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gate}\ndata: {mode: " + mode + ", owner: sre}\n"
	}
	commit := func(msg string, files map[string]string) string {
		gittest.WriteFiles(t, dir, files)
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", msg)
		return strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	}
	added := commit("platform: an app-of-apps with the gate", map[string]string{
		"clusters/prod/apps/platform.yaml":     app("acme-platform", "clusters/prod/platform", "argocd"),
		"clusters/prod/platform/policies.yaml": app("acme-policies", "policies/gate", "policies"),
		"policies/gate/gate.yaml":              gate("strict")})
	loosened := commit("policies: loosen the gate", map[string]string{"policies/gate/gate.yaml": gate("loose")})
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "ConfigMap", Namespace: "policies", Name: "gate"}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "acme-policies", b.Application)
	assert.Equal(t, "policies/gate", b.Path)
	assert.Equal(t, "policies", b.Object.Namespace, "its Application's destination")
	got := map[string]string{}
	for _, f := range b.Fields {
		require.NotNil(t, f.Commit, f.Path)
		got[f.Path] = f.Commit.SHA
	}
	if d := cmp.Diff(map[string]string{".apiVersion": added, ".kind": added, ".metadata.name": added, ".data.mode": loosened, ".data.owner": added}, got); d != "" {
		t.Errorf("commits per field (-want +got):\n%s", d)
	}

	_, err = Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "ConfigMap", Name: "nope"}}, Options{})
	var nd *NotDeclaredError
	require.True(t, errors.As(err, &nd), "%v", err)
	assert.Equal(t, []string{"acme-platform (clusters/prod/platform)", "acme-web (services/web/prod)", "acme-worker (charts/worker)",
		"acme-policies (policies/gate)"}, nd.Applications, "the nested Application too")
}
