package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/manifest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// chartDir is the auditor's Helm chart, from this package's directory.
const chartDir = "../../charts/auditor"

// helmTemplate renders the chart with the helm CLI as release "auditor" in namespace ns, with
// the values files given.
func helmTemplate(t *testing.T, helm, ns string, values ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "auditor", chartDir, "--namespace", ns}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	out, err := exec.Command(helm, args...).Output()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), stderr(err))
	objs, err := manifest.Decode(out)
	require.NoError(t, err)
	return objs
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// chartValues are the chart's test values files (helm's ci/ convention).
func chartValues(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// TestChartLintsClean: `helm lint --strict` passes with the defaults and with each ci/ values file.
func TestChartLintsClean(t *testing.T) {
	helm := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Helm })
	for _, values := range chartValues(t) {
		out, err := exec.Command(helm, "lint", "--strict", chartDir, "--values", values).CombinedOutput()
		assert.NoError(t, err, "helm lint with %s:\n%s", values, out)
	}
}

// TestChartDefaultsRenderNothingOfThisPlatform: with default values the chart names no namespace,
// label, priority class or node pool of the LLM platform: it installs into any cluster.
func TestChartDefaultsRenderNothingOfThisPlatform(t *testing.T) {
	helm := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Helm })
	objs := helmTemplate(t, helm, "tools")
	require.NotEmpty(t, objs)
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		text := string(data)
		for _, platform := range []string{"llm-system", "llm-platform", "platform.llm/", "llm-api", "llm-", "CriticalAddonsOnly", "kube-prometheus-stack"} {
			assert.NotContains(t, text, platform, "%s %s", o.GetKind(), o.GetName())
		}
		assert.NotEqual(t, "ServiceMonitor", o.GetKind(), "a ServiceMonitor needs a CRD the cluster may lack: off by default")
		assert.NotEqual(t, "NetworkPolicy", o.GetKind(), "off by default")
		if ns := o.GetNamespace(); ns != "" {
			assert.Contains(t, []string{"tools", "argocd"}, ns, "%s %s: only the release's and Argo CD's namespaces", o.GetKind(), o.GetName())
		}
	}
}

// TestChartConfigLoads: the config file the chart renders, with the defaults and with each ci/
// values file, is one the daemon loads.
func TestChartConfigLoads(t *testing.T) {
	helm := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Helm })
	for _, values := range chartValues(t) {
		t.Run(filepath.Base(values), func(t *testing.T) {
			cfg := chartConfig(t, helmTemplate(t, helm, "tools", values))
			assert.NotEmpty(t, cfg.Repo)
			require.NotNil(t, cfg.RepoServer, "the repo-server renders by default")
			assert.Equal(t, "argocd-repo-server.argocd.svc:8081", cfg.RepoServer.Address)
			if cfg.LeaderElection.Enabled {
				assert.Equal(t, "tools", cfg.LeaderElection.Namespace, "the Lease is in the release's namespace")
			}
		})
	}
}

// TestChartRBACReadsOnly: every rule the chart grants is get, list or watch, but for the
// leaders' Leases in the release's namespace.
func TestChartRBACReadsOnly(t *testing.T) {
	helm := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Helm })
	for _, values := range chartValues(t) {
		for _, o := range helmTemplate(t, helm, "tools", values) {
			if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				for _, v := range rule["verbs"].([]any) {
					if v == "get" || v == "list" || v == "watch" {
						continue
					}
					assert.Equal(t, []any{"leases"}, rule["resources"], "%s %s may %s", o.GetKind(), o.GetName(), v)
					assert.Equal(t, "tools", o.GetNamespace(), "%s %s may %s", o.GetKind(), o.GetName(), v)
				}
			}
		}
	}
}

// TestChartVersionIsTheAppVersion: the chart is released with the binary, so its version,
// appVersion and default image tag are one.
func TestChartVersionIsTheAppVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(data, &chart))
	assert.Equal(t, chart.Version, chart.AppVersion)
	if tag := os.Getenv("VERSION"); strings.HasPrefix(tag, "v") {
		assert.Equal(t, strings.TrimPrefix(tag, "v"), chart.Version, "the release tag and Chart.yaml")
	}
}

// chartConfig loads the config.yaml of the rendered ConfigMap with the daemon's loader.
func chartConfig(t *testing.T, objs []*unstructured.Unstructured) *Config {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" || !strings.HasSuffix(o.GetName(), "-config") {
			continue
		}
		text, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
		file := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(file, []byte(text), 0o600))
		cfg, err := LoadConfig(file)
		require.NoError(t, err, "config.yaml:\n%s", text)
		return cfg
	}
	t.Fatal("no ConfigMap <release>-config rendered")
	return nil
}

// shippedConfigMap is the ConfigMap auditor-config of base/auditor/auditor.yaml.
func shippedConfigMap(t *testing.T) struct{ Data map[string]string } {
	t.Helper()
	data, err := os.ReadFile("../../base/auditor/auditor.yaml")
	require.NoError(t, err)
	objs, err := manifest.Decode(data)
	require.NoError(t, err)
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "auditor-config" {
			text, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			return struct{ Data map[string]string }{Data: map[string]string{"config.yaml": text}}
		}
	}
	t.Fatal("base/auditor/auditor.yaml has no ConfigMap auditor-config")
	return struct{ Data map[string]string }{}
}

// TestCheckedInBasesAreTheChartsRender: base/auditor/auditor.yaml (the platform's values) and
// deploy/auditor/auditor.yaml (the defaults) are what `make auditor-base` renders from the chart
// now, so neither drifts from it.
func TestCheckedInBasesAreTheChartsRender(t *testing.T) {
	helm := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Helm })
	for file, args := range map[string][]string{
		"base/auditor/auditor.yaml":   {"--namespace", "llm-system", "--values", "../../base/auditor/values.yaml"},
		"deploy/auditor/auditor.yaml": {"--namespace", "auditor"},
	} {
		out, err := exec.Command(helm, append([]string{"template", "auditor", chartDir, "--set", "helmLabels=false"}, args...)...).Output()
		require.NoError(t, err, stderr(err))
		want, err := manifest.Decode(out)
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join("../..", file))
		require.NoError(t, err)
		got, err := manifest.Decode(data)
		require.NoError(t, err)
		require.Equal(t, len(want), len(got), "%s: objects; run `make auditor-base`", file)
		for i := range want {
			assert.Equal(t, want[i].Object, got[i].Object, "%s: %s %s differs from the chart's render; run `make auditor-base`", file, want[i].GetKind(), want[i].GetName())
		}
	}
}
