package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// TestShippedConfigLoads loads the configuration base/auditor ships (charts/auditor's render),
// as the pod would see it.
func TestShippedConfigLoads(t *testing.T) {
	cm := shippedConfigMap(t)
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	// The StatefulSet sets them: AUDITOR_ENV per overlay, the others from the env's site values.
	t.Setenv("AUDITOR_ENV", "prod")
	t.Setenv("AUDITOR_REPO", "https://git.acme.io/ml/platform.git")
	t.Setenv("ARGOCD_URL", "https://cd.acme.io")
	cfg, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Repo != "https://git.acme.io/ml/platform.git" || cfg.ArgoCDURL != "https://cd.acme.io" {
		t.Errorf("repo %q and argocdURL %q are not the site's", cfg.Repo, cfg.ArgoCDURL)
	}
	if len(cfg.Envs) != 1 || cfg.Envs[0] != "prod" || !cfg.LeaderElection.Enabled || cfg.FetchInterval.Duration.String() != "1m0s" || len(cfg.Sinks) != 1 {
		t.Errorf("unexpected config %+v", cfg)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]string{
		"repo is required":                                  "envs: [prod]\nstateDir: /tmp/x\n",
		"exactly one of":                                    "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nsinks: [{name: a}]\n",
		"unknown field":                                     "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nsinkz: []\n",
		"duration \"soon\"":                                 "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nfetchInterval: soon\n",
		"stateDir is required":                              "repo: x\nenvs: [prod]\n",
		"at least one environm":                             "repo: x\nstateDir: /tmp/x\n",
		"manager is required":                               "repo: x\nenvs: [prod]\nstateDir: /tmp/x\ncontrollers: [{paths: [/spec/replicas]}]\n",
		"not a JSON pointer":                                "repo: x\nenvs: [prod]\nstateDir: /tmp/x\ncontrollers: [{manager: m, paths: [spec.replicas]}]\n",
		`env "qa" is not one`:                               "repo: x\nenvs: [prod]\nstateDir: /tmp/x\ncontrollers: [{manager: m, paths: [/spec], envs: [qa]}]\n",
		"webhook: a secret is required":                     "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nwebhook: {}\n",
		"auth token needs tokenFile":                        "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napi: {auth: token}\n",
		`auth "magic"`:                                      "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napi: {auth: magic}\n",
		`mcpTools: no tool "delete"`:                        "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napi: {mcpTools: [drift, delete]}\n",
		"unknown field \"path\"":                            "repo: x\nenvs: [prod]\nstateDir: /tmp/x\ncontrollers: [{manager: m, path: /spec}]\n",
		`applications: "qa" is not one`:                     "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napplications: {qa: {projects: [p]}}\n",
		"projects or selector is requi":                     "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napplications: {prod: {namespaces: [argocd]}}\n",
		"applications.prod.selector":                        "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napplications: {prod: {selector: 'team in (a'}}\n",
		"is not a namespace name":                           "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napplications: {prod: {projects: [p], namespaces: [Argo_CD]}}\n",
		"is neither argocdNamespace (argocd)":               "repo: x\nenvs: [prod]\nstateDir: /tmp/x\napplications: {prod: {projects: [p], namespaces: [team-a]}}\n",
		"appNamespace is argocdNamespace's deprecated name": "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nargocdNamespace: argocd\nappNamespace: gitops\n",
		"appNamespaces: \"Team_A\"":                         "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nappNamespaces: [Team_A]\n",
		"name, server and kubeconfig are":                   "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nclusters: [{name: edge, server: 'https://e'}]\n",
		"a second cluster of that name":                     "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nclusters: [{name: e, server: 'https://e', kubeconfig: k}, {name: f, server: 'https://e', kubeconfig: k}]\n",
		"name \"arn:aws:eks\"":                              "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nclusters: [{name: 'arn:aws:eks', server: 'https://e', kubeconfig: k}]\n",
		"Argo CD's own cluster is":                          "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nclusters: [{name: in-cluster, server: 'https://x', kubeconfig: k}]\n",
		"shard needs leaderElection.enab":                   "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nleaderElection: {shard: true}\n",
		`roots: "qa" is not one`:                            "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nroots: {qa: acme-root}\n",
		`roots.prod: "Acme Root"`:                           "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nroots: {prod: Acme Root}\n",
		"\"eu.prod\": with leaderElection":                  "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nleaderElection: {enabled: true, shard: true}\nclusters: [{name: eu.prod, server: 'https://e', kubeconfig: k}]\n",
	}
	for want, doc := range cases {
		file := filepath.Join(t.TempDir(), "c.yaml")
		_ = os.WriteFile(file, []byte(doc), 0o644)
		if _, err := LoadConfig(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to mention %q", doc, err, want)
		}
	}
}

// TestControllersPerEnv: rules from the config add to the defaults, for the envs they name.
func TestControllersPerEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`repo: x
envs: [staging, prod]
stateDir: /tmp/x
controllers:
  - manager: vpa-updater
    group: apps
    kinds: [Deployment]
    paths: [/spec/template/spec/containers]
    envs: [prod]
  - manager: cnpg-manager
    group: postgresql.cnpg.io
    paths: [/metadata/annotations]
`), 0o644))
	cfg, err := LoadConfig(file)
	require.NoError(t, err)
	vpa := drift.ControllerRule{Manager: "vpa-updater", Group: "apps", Kinds: []string{"Deployment"}, Paths: []string{"/spec/template/spec/containers"}}
	cnpg := drift.ControllerRule{Manager: "cnpg-manager", Group: "postgresql.cnpg.io", Paths: []string{"/metadata/annotations"}}
	assert.Equal(t, append(slices.Clone(drift.DefaultControllers), vpa, cnpg), cfg.controllersFor("prod"))
	assert.Equal(t, append(slices.Clone(drift.DefaultControllers), cnpg), cfg.controllersFor("staging"))
	cfg.NoDefaultControllers = true
	assert.Equal(t, []drift.ControllerRule{cnpg}, cfg.controllersFor("staging"))
}

func TestExtraScopeConfig(t *testing.T) {
	cfg := ExtraConfig{Kinds: []string{"networking.k8s.io/v1/IngressClass", "v1/Event"}, Except: []string{"scheduling.k8s.io/PriorityClass", "Namespace"}, Ignore: []string{"team=sre"},
		Own: []string{"rbac.authorization.k8s.io/RoleBinding:llm-rag/auditor-read", "ConfigMap:llm-rag/auditor-state", "rbac.authorization.k8s.io/ClusterRole:auditor-read"}}
	opts := drift.DefaultOptions()
	cfg.apply(&opts)
	assert.Contains(t, opts.ExtraKinds, schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass"})
	assert.Contains(t, opts.ExtraKinds, schema.GroupVersionKind{Version: "v1", Kind: "Event"})
	assert.Contains(t, opts.ExtraExcept, schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"})
	assert.Contains(t, opts.ExtraExcept, schema.GroupKind{Kind: "Namespace"})
	assert.Contains(t, opts.ExtraIgnore, "team=sre")
	assert.Equal(t, map[drift.Ref]bool{
		{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding", Namespace: "llm-rag", Name: "auditor-read"}: true,
		{Kind: "ConfigMap", Namespace: "llm-rag", Name: "auditor-state"}:                                      true,
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "auditor-read"}:                       true,
	}, opts.ExtraOwn)
	assert.True(t, opts.ExtraRendered)
	assert.NotContains(t, drift.DefaultExtraKinds, schema.GroupVersionKind{Version: "v1", Kind: "Event"}, "the defaults are not changed")

	for _, bad := range []ExtraConfig{{Kinds: []string{"IngressClass"}}, {Except: []string{"a/b/C"}}, {Ignore: []string{"a in (b"}}, {Own: []string{"RoleBinding"}}, {Own: []string{"RoleBinding:llm-rag/"}}} {
		c := Config{Repo: ".", Envs: []string{"prod"}, StateDir: t.TempDir(), Extra: bad}
		assert.Error(t, c.validate(), "%+v", bad)
	}
}

// TestSelectionFromAnotherAppNamespace: a selection may pick Applications from a namespace of
// appNamespaces (Argo CD's apps in any namespace), which the daemon then watches too.
func TestSelectionFromAnotherAppNamespace(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("repo: x\nenvs: [prod]\nstateDir: /tmp/x\nappNamespaces: [team-a]\napplications: {prod: {projects: [p], namespaces: [team-a]}}\n"), 0o644))
	cfg, err := LoadConfig(file)
	require.NoError(t, err)
	sel := cfg.Applications["prod"].selection(cfg.AppNamespace)
	require.Equal(t, []string{"team-a"}, sel.Namespaces)
}

// TestEnvApplicationNames: the Applications an env is found by, as the config names them.
func TestEnvApplicationNames(t *testing.T) {
	for _, tc := range []struct {
		doc, app, root string
	}{
		{doc: "", app: "llm-prod", root: "root-prod"},
		{doc: "appNamePrefix: ''\nrootNamePrefix: ''\n", app: "prod", root: "prod"},
		{doc: "appNamePrefix: acme-\nrootNamePrefix: boot-\n", app: "acme-prod", root: "boot-prod"},
		{doc: "roots: {prod: acme-root}\n", app: "", root: "acme-root"},
	} {
		file := filepath.Join(t.TempDir(), "c.yaml")
		require.NoError(t, os.WriteFile(file, []byte("repo: x\nenvs: [prod]\nstateDir: /tmp/x\n"+tc.doc), 0o644))
		cfg, err := LoadConfig(file)
		require.NoError(t, err, tc.doc)
		assert.Equal(t, tc.app, cfg.appName("prod"), tc.doc)
		assert.Equal(t, tc.root, cfg.rootName("prod"), tc.doc)
	}
}

// TestArgoCDNamespaceAndItsDeprecatedName: argocdNamespace sets the Applications' namespace;
// appNamespace, its old name, still does; both are accepted when they agree.
func TestArgoCDNamespaceAndItsDeprecatedName(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"argocdNamespace: gitops\n", "gitops"},
		{"appNamespace: gitops\n", "gitops"},
		{"argocdNamespace: gitops\nappNamespace: gitops\n", "gitops"},
		{"", DefaultAppNamespace},
	} {
		c, err := parseConfig("c.yaml", []byte("repo: x\nenvs: [prod]\nstateDir: /tmp/x\n"+tc.doc))
		require.NoError(t, err, tc.doc)
		assert.Equal(t, tc.want, c.AppNamespace, tc.doc)
	}
}
