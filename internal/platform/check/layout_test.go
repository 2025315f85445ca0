package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// acmeRepo is a team's own repository of another layout (internal/engine/layout/testdata/acme: a root
// acme-root over clusters/prod/apps, a Kustomize service under services/, a Helm chart under
// charts/) in a fresh Git repository, committed.
func acmeRepo(t *testing.T) (dir string, commit func(msg string)) {
	t.Helper()
	dir = t.TempDir()
	gittest.WriteFiles(t, dir, gittest.ReadTree(t, "../../engine/layout/testdata/acme", "."))
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	commit = func(msg string) {
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-qm", msg)
	}
	commit("acme")
	return dir, commit
}

// ruleSet lists the rules of findings, sorted and without repeats.
func ruleSet(vs []Violation) []string {
	return slices.Compact(slices.Sorted(slices.Values(rules(vs))))
}

func TestAnotherLayoutIsCheckedByTheGenericRulesAlone(t *testing.T) {
	dir, commit := acmeRepo(t)
	write := func(rel, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o644))
	}
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)

	// A change to the service: its env is the root's tree, checked, passing. None of this
	// platform's rules (Pod Security labels, network default-deny, digests) runs: the repository
	// did not opt in.
	write("services/web/prod/replicas.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 4\n")
	commit("web: 4 replicas")
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	require.Len(t, res.Envs, 1)
	prod := res.Envs[0]
	assert.Equal(t, "prod", prod.Env)
	assert.True(t, res.Passed, "violations: %v", prod.Violations)
	assert.Empty(t, prod.Warnings)
	var names []string
	for _, a := range prod.Applications {
		assert.Empty(t, a.Error, a.Name)
		names = append(names, a.Name)
	}
	assert.Equal(t, []string{"acme-web", "acme-worker"}, names, "the Applications the root syncs, each rendered")
	require.Len(t, prod.Changes, 1)
	assert.Equal(t, "web", prod.Changes[0].Name)

	// A generic rule still fails a change: a Deployment reading a ConfigMap no Application has.
	write("services/web/base/deployment.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example.com/acme/web:1.4.2
          envFrom:
            - configMapRef: {name: web-settings}
`)
	commit("web: settings from a ConfigMap")
	res, err = Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.False(t, res.Passed)
	assert.Equal(t, []string{"refs-resolve"}, ruleSet(res.Envs[0].Violations))

	// Turned off in the layout, with a reason: reported as silenced, not failing.
	write(".auditor.yaml", `envs:
  - name: prod
    root: acme-root
    rootManifest: clusters/prod/root.yaml
rules:
  - name: refs-resolve
    reason: web-settings is made by the settings operator
`)
	commit("refs-resolve off")
	// The change that turns a rule off is judged by the gate before it: it fails, as a change
	// to the gate, and is merged on its own.
	res, err = Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.False(t, res.Passed)
	assert.Equal(t, []string{"layout-gate"}, ruleSet(res.Envs[0].Violations))

	// Once merged, the rule's findings are reported as silenced, with the reason, not failing.
	write("services/web/prod/replicas.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n")
	commit("web: 5 replicas")
	res, err = Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.True(t, res.Passed, "violations: %v", res.Envs[0].Violations)
	require.Len(t, res.Envs[0].Silenced, 1)
	assert.Equal(t, "refs-resolve", res.Envs[0].Silenced[0].Rule)
	assert.Equal(t, "web-settings is made by the settings operator", res.Envs[0].Silenced[0].Reason)

	// A change that drops the env from the layout fails the same way.
	write(".auditor.yaml", "envs:\n  - {name: qa, root: acme-root, rootManifest: clusters/prod/root.yaml}\n")
	commit("prod no longer checked")
	res, err = Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	assert.False(t, res.Passed)
	var gate []string
	for _, e := range res.Envs {
		for _, v := range e.Violations {
			gate = append(gate, e.Env+" "+v.Rule)
		}
	}
	assert.Contains(t, gate, "prod layout-gate")
}

func TestAnEnvCheckCannotSeeIsSaidSo(t *testing.T) {
	dir, commit := acmeRepo(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, layout string
		passed       bool
		errs         []string // each env's error, or its note
	}{
		{name: "a root without its manifest or path", layout: "envs:\n- {name: prod, root: acme-root}\n",
			errs: []string{"prod: check reads Git alone: say where Git keeps the root acme-root's manifest (rootManifest) or the path it syncs (apps)"}},
		{name: "a path that is not there", layout: "envs:\n- {name: prod, root: acme-root, apps: clusters/prod/app}\n",
			errs: []string{"prod: the path its root syncs, clusters/prod/app, is not in the repository"}},
		{name: "a selection: noted, not failing", layout: "envs:\n- {name: prod, root: acme-root, apps: clusters/prod/apps}\n- {name: sandbox, projects: [sandbox]}\n",
			passed: true, errs: []string{"sandbox: not checked: its Applications are picked from the cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".auditor.yaml"), []byte(tc.layout), 0o644))
			commit(tc.name)
			res, _ := Run(repo, "HEAD", "HEAD")
			require.NotNil(t, res)
			assert.Equal(t, tc.passed, res.Passed)
			var got []string
			for _, e := range res.Envs {
				if why := e.Error + e.Skipped; why != "" {
					got = append(got, e.Env+": "+why)
				}
			}
			require.Len(t, got, len(tc.errs))
			for i, want := range tc.errs {
				assert.Contains(t, got[i], want)
			}
		})
	}
	// No envs at all: an error, never a pass that checked nothing.
	require.NoError(t, os.Remove(filepath.Join(dir, ".auditor.yaml")))
	commit("no layout")
	_, err = Run(repo, "HEAD", "HEAD")
	assert.ErrorContains(t, err, "the repository has no envs")
}

func TestThePlatformRulesRunWhereTheRepositoryOptsIn(t *testing.T) {
	dir, commit := acmeRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".auditor.yaml"), []byte(`profile: llm-platform
envs:
  - name: prod
    root: acme-root
    rootManifest: clusters/prod/root.yaml
`), 0o644))
	commit("opt in")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	// This platform pins prod to a release (apps/prod/release.yaml): its rule says so once the
	// repository asks for this platform's rules.
	assert.Contains(t, ruleSet(res.Envs[0].Violations), "release-pinned")
}

func TestAMisspeltRuleIsSaidToTurnNothingOff(t *testing.T) {
	dir, commit := acmeRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".auditor.yaml"), []byte(`envs:
  - {name: prod, root: acme-root, rootManifest: clusters/prod/root.yaml}
rules:
  - {name: refs-reslove, reason: typo}
  - {name: first-sync, reason: spelt right}
`), 0o644))
	commit("rules off")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD", "HEAD")
	require.NoError(t, err)
	var warned []string
	for _, w := range res.Envs[0].Warnings {
		if w.Rule == "layout" {
			warned = append(warned, w.Object+": "+w.Message)
		}
	}
	require.Len(t, warned, 1)
	assert.Contains(t, warned[0], ".auditor.yaml rules[0]: no rule refs-reslove")
}

func TestASecretsValuesNeverLeaveTheCheck(t *testing.T) {
	dir, commit := acmeRepo(t)
	secret := func(password string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "services/web/base/secret.yaml"), []byte(
			"apiVersion: v1\nkind: Secret\nmetadata: {name: web-creds}\nstringData: {password: "+password+"}\n"), 0o644))
	}
	secret("hunter2-OLD")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "services/web/base/kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml, service.yaml, secret.yaml]\n"), 0o644))
	commit("web: creds")
	secret("hunter2-NEW")
	commit("web: new password")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD~1", "HEAD")
	require.NoError(t, err)
	out, err := json.Marshal(res)
	require.NoError(t, err)
	assert.NotContains(t, string(out), "hunter2")
	require.Len(t, res.Envs[0].Changes, 1)
	c := res.Envs[0].Changes[0]
	assert.Equal(t, "Secret", c.Kind)
	require.NotEmpty(t, c.Fields, "which field changed is said")
	assert.Equal(t, ".stringData.password", c.Fields[0].Path)
}

// TestAnOldRuleNameStillTurnsItsRuleOff: vllm-image-digest, folded into image-digest, turns
// image-digest off where a layout names it, and is no unknown rule.
func TestAnOldRuleNameStillTurnsItsRuleOff(t *testing.T) {
	l, err := layout.Parse([]byte("rules:\n  - name: vllm-image-digest\n    envs: [dev]\n    reason: dev pulls tags\n"))
	require.NoError(t, err)
	found := []Violation{{Rule: "image-digest", Object: "Deployment a/b", Message: "by tag"}, {Rule: "replicas-spread", Object: "Deployment a/b"}}
	kept, off := silence(l, "dev", found)
	assert.Equal(t, found[1:], kept)
	assert.Equal(t, []Silenced{{Violation: found[0], Reason: "dev pulls tags"}}, off)
	kept, off = silence(l, "prod", found)
	assert.Equal(t, found, kept)
	assert.Empty(t, off)
	assert.True(t, ruleNames["vllm-image-digest"], "a layout may still name it")
}
