package blame

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

const (
	vllmBase = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: inference
  labels: {app: vllm}
spec:
  replicas: 1
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.0
          args: [--port=8000, --max-num-seqs=15]
`
	llamaBase = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama
  namespace: inference
spec:
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      containers:
        - name: llama
          image: llama:v1
`
	overlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../../base/vllm]
`
	replicasPatch = `apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: inference}
spec:
  replicas: 3
`
)

// history is a repository whose prod overlay changes over five commits; the returned hashes are
// in commit order.
func history(t *testing.T) (dir string, commits map[string]string) {
	t.Helper()
	dir = t.TempDir()
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	commits = map[string]string{}
	commit := func(name, msg string, files map[string]string) {
		gittest.WriteFiles(t, dir, files)
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", msg)
		commits[name] = gittest.Run(t, dir, "rev-parse", "HEAD")
	}
	commit("c1", "base: vllm deployment", map[string]string{
		"base/vllm/kustomization.yaml": "resources: [vllm.yaml]\n", "base/vllm/vllm.yaml": vllmBase,
		"overlays/prod/kustomization.yaml": overlay})
	commit("c2", "prod: vllm v0.11.0, llama", map[string]string{
		"base/vllm/kustomization.yaml":     "resources: [vllm.yaml, llama.yaml]\n",
		"base/vllm/llama.yaml":             llamaBase,
		"overlays/prod/kustomization.yaml": overlay + "images:\n  - name: vllm/vllm-openai\n    newTag: v0.11.0\n"})
	commit("c3", "docs only", map[string]string{"README.md": "prod runs vllm\n"})
	commit("c4", "prod: broken overlay", map[string]string{"overlays/prod/kustomization.yaml": "resources: [\n"})
	commit("c5", "prod: 3 replicas", map[string]string{
		"overlays/prod/replicas.yaml":      replicasPatch,
		"overlays/prod/kustomization.yaml": overlay + "images:\n  - name: vllm/vllm-openai\n    newTag: v0.11.0\npatches:\n  - path: replicas.yaml\n"})
	return dir, commits
}

// TestGitNamesTheCommitOfEachField: every field gets the commit that last changed its rendered
// value; a commit that does not render is skipped with a note, a commit that changes nothing the
// env reads is never named, and the walk bounded by MaxCommits marks what it could not finish.
func TestGitNamesTheCommitOfEachField(t *testing.T) {
	dir, c := history(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	vllm := Ref{Kind: "deployment", Name: "vllm"}
	image := ".spec.template.spec.containers[name=vllm].image"
	cases := []struct {
		name       string
		req        Request
		want       map[string]string // path → commit name ("^" first: boundary)
		complete   bool
		commits    int
		skipped    []string
		oldestName string
	}{
		{"from the head", Request{Env: "prod", Object: vllm},
			map[string]string{".spec.replicas": "c5", image: "c2", ".metadata.name": "c1", ".metadata.labels.app": "c1",
				".spec.template.spec.containers[name=vllm].args": "c1"},
			true, 5, []string{"c4"}, "c1"},
		{"from an older revision", Request{Env: "prod", Object: vllm, Revision: c["c3"]},
			map[string]string{".spec.replicas": "c1", image: "c2"}, true, 3, nil, "c1"},
		{"bounded", Request{Env: "prod", Object: vllm, MaxCommits: 3},
			map[string]string{".spec.replicas": "c5", image: "^c3", ".metadata.name": "^c3"}, false, 3, []string{"c4"}, "c3"},
		{"an object added later", Request{Env: "prod", Object: Ref{Kind: "Deployments", Name: "llama", Namespace: "inference"}},
			map[string]string{".spec.template.spec.containers[name=llama].image": "c2", ".metadata.name": "c2"}, true, 5, []string{"c4"}, "c1"},
	}
	name := map[string]string{}
	for k, v := range c {
		name[v] = k
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Git(context.Background(), repo, tc.req, Options{})
			require.NoError(t, err)
			got := map[string]string{}
			for _, f := range b.Fields {
				if _, ok := tc.want[f.Path]; ok {
					require.NotNil(t, f.Commit, f.Path)
					got[f.Path] = name[f.Commit.SHA]
					if f.Commit.Boundary {
						got[f.Path] = "^" + got[f.Path]
					}
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("commits per field (-want +got):\n%s", d)
			}
			assert.Equal(t, tc.complete, b.History.Complete, "complete")
			assert.Equal(t, tc.commits, b.History.Commits, "commits walked")
			assert.Equal(t, tc.oldestName, name[b.History.Oldest], "oldest")
			var skipped []string
			for _, s := range b.History.Skipped {
				skipped = append(skipped, name[s.Commit])
			}
			assert.Equal(t, tc.skipped, skipped)
			for _, f := range b.Fields {
				if !f.Commit.Boundary {
					assert.NotEqual(t, c["c3"], f.Commit.SHA, "%s: the docs-only commit set nothing", f.Path)
				}
			}
		})
	}
}

// TestGitFieldsCarryValuesAndCommits: the Git value of each field and the commit's author, date
// and subject; the render cache answers the commits that changed nothing the env reads.
func TestGitFieldsCarryValuesAndCommits(t *testing.T) {
	dir, c := history(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	renders := render.NewCache("", 4)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Name: "vllm"}}, Options{Renders: renders})
	require.NoError(t, err)
	assert.Equal(t, Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "inference", Name: "vllm"}, b.Object)
	assert.Equal(t, c["c5"], b.Revision)
	byPath := map[string]Field{}
	for _, f := range b.Fields {
		byPath[f.Path] = f
	}
	assert.Equal(t, int64(3), byPath[".spec.replicas"].Git)
	assert.Equal(t, "vllm/vllm-openai:v0.11.0", byPath[".spec.template.spec.containers[name=vllm].image"].Git)
	assert.Equal(t, []any{"--port=8000", "--max-num-seqs=15"}, byPath[".spec.template.spec.containers[name=vllm].args"].Git)
	cm := byPath[".spec.replicas"].Commit
	assert.Equal(t, "Human", cm.Author)
	assert.Equal(t, "human@example.com", cm.Email)
	assert.Equal(t, "prod: 3 replicas", cm.Subject)
	assert.False(t, cm.Date.IsZero())
	assert.Len(t, b.Notes, 1, "the commit that did not render is noted")
	st := renders.Stats()
	assert.Equal(t, 1, st.ByContent, "c3 (docs only) reused c2's render: %+v", st)
	assert.Equal(t, 3, st.Rendered, "kustomize ran for c5, c2 and c1 only: %+v", st)
}

// TestGitObjectNotDeclared: an object the env does not have, or a name two namespaces share
// when none is given, is a NotDeclaredError naming the candidates.
func TestGitObjectNotDeclared(t *testing.T) {
	dir, _ := history(t)
	gittest.WriteFiles(t, dir, map[string]string{"base/vllm/other.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm, namespace: other}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}}}\n",
		"base/vllm/kustomization.yaml": "resources: [vllm.yaml, llama.yaml, other.yaml]\n"})
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "another vllm")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	_, err = Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Name: "nope"}}, Options{})
	var nd *NotDeclaredError
	require.True(t, errors.As(err, &nd), "%v", err)
	assert.Empty(t, nd.Candidates)
	_, err = Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Name: "vllm"}}, Options{})
	require.True(t, errors.As(err, &nd), "%v", err)
	assert.Equal(t, []string{"Deployment inference/vllm", "Deployment other/vllm"}, nd.Candidates)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Name: "vllm", Namespace: "other"}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "other", b.Object.Namespace)
}

// TestGitWalksTheApplicationThatDeclaresTheObject: an object of another Application of the env
// (declared in apps/<env>, its path a plain directory) is blamed in that path's history.
func TestGitWalksTheApplicationThatDeclaresTheObject(t *testing.T) {
	dir, _ := history(t)
	gate := func(mode string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gate, namespace: policies}\ndata: {mode: " + mode + ", owner: sre}\n"
	}
	app := `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: llm-policies, namespace: argocd}
spec:
  project: default
  source: {repoURL: https://git.example.com/platform.git, targetRevision: main, path: policies/gate}
  destination: {server: https://kubernetes.default.svc, namespace: policies}
`
	commit := func(msg string, files map[string]string) string {
		gittest.WriteFiles(t, dir, files)
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", msg)
		return gittest.Run(t, dir, "rev-parse", "HEAD")
	}
	added := commit("policies: the gate", map[string]string{"apps/prod/kustomization.yaml": "resources: [policies.yaml]\n",
		"apps/prod/policies.yaml": app, "policies/gate/gate.yaml": gate("strict")})
	commit("docs", map[string]string{"README.md": "gate\n"})
	loosened := commit("policies: loosen the gate", map[string]string{"policies/gate/gate.yaml": gate("loose")})
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "ConfigMap", Name: "gate"}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "llm-policies", b.Application)
	assert.Equal(t, "policies/gate", b.Path)
	commits := map[string]string{}
	for _, f := range b.Fields {
		require.NotNil(t, f.Commit, f.Path)
		commits[f.Path] = f.Commit.SHA
	}
	assert.Equal(t, loosened, commits[".data.mode"])
	assert.Equal(t, added, commits[".data.owner"], "set when the object came into the env")
	assert.True(t, b.History.Complete)
}

func TestParseRef(t *testing.T) {
	cases := []struct {
		in   string
		want Ref
		err  bool
	}{
		{"deployment/vllm-qwen", Ref{Kind: "deployment", Name: "vllm-qwen", Namespace: "ns"}, false},
		{"deployment.apps/vllm-qwen", Ref{Kind: "deployment", Group: "apps", Name: "vllm-qwen", Namespace: "ns"}, false},
		{"vllm-qwen", Ref{}, true},
		{"a/b/c", Ref{}, true},
	}
	for _, tc := range cases {
		got, err := ParseRef(tc.in, "ns")
		if tc.err {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
}

// TestGitNeverShowsSecretValues: a Secret's keys are blamed like any field, their values are not
// shown (the drift report masks them too).
func TestGitNeverShowsSecretValues(t *testing.T) {
	dir, _ := history(t)
	gittest.WriteFiles(t, dir, map[string]string{
		"base/vllm/secret.yaml":        "apiVersion: v1\nkind: Secret\nmetadata: {name: key, namespace: inference}\nstringData: {token: hunter2}\ndata: {b: c3dvcmRmaXNo}\n",
		"base/vllm/kustomization.yaml": "resources: [vllm.yaml, llama.yaml, secret.yaml]\n"})
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "a secret")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "secret", Name: "key"}}, Options{})
	require.NoError(t, err)
	got := map[string]any{}
	for _, f := range b.Fields {
		got[f.Path] = f.Git
		require.NotNil(t, f.Commit)
		assert.Equal(t, "a secret", f.Commit.Subject)
	}
	assert.Equal(t, Redacted, got[".stringData.token"])
	assert.Equal(t, Redacted, got[".data.b"])
	assert.Equal(t, "key", got[".metadata.name"])
}

// TestGitWalksAnApplicationOfTheLiveGroup: an object Git's own layout does not declare (its
// Application is under a root elsewhere, and its render leaves the namespace to Argo CD) is
// walked in the Application the audit found it under, in that Application's destination namespace.
func TestGitWalksAnApplicationOfTheLiveGroup(t *testing.T) {
	dir := t.TempDir()
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	commit := func(files map[string]string) string {
		gittest.WriteFiles(t, dir, files)
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", "change")
		return strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	}
	settings := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: edge-settings}\ndata: {replicas: \"%s\", model: qwen}\n"
	first := commit(map[string]string{"overlays/prod/kustomization.yaml": "resources: []\n",
		"edge/settings.yaml": fmt.Sprintf(settings, "1")}) // a plain directory, as Argo CD reads it
	second := commit(map[string]string{"edge/settings.yaml": fmt.Sprintf(settings, "2")})
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	ref := Ref{Kind: "configmap", Namespace: "edge-ns", Name: "edge-settings"}

	_, err = Git(context.Background(), repo, Request{Env: "prod", Object: ref}, Options{})
	var nd *NotDeclaredError
	require.ErrorAs(t, err, &nd, "Git's own layout does not declare it")

	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: ref,
		Applications: []AppPath{{Name: "edge", Path: "edge", Namespace: "edge-ns"}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "edge", b.Application)
	assert.Equal(t, "edge-ns", b.Object.Namespace, "where Argo CD put it")
	commits := map[string]string{}
	for _, f := range b.Fields {
		if f.Commit != nil {
			commits[f.Path] = f.Commit.SHA
		}
	}
	assert.Equal(t, second, commits[".data.replicas"])
	assert.Equal(t, first, commits[".data.model"])
}
