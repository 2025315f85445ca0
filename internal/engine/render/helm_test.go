package render

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// helmCLI runs the helm binary Argo CD's repo-server runs (built by `make tools`) the way the
// repo-server calls it (argo-cd util/helm cmd.go template): the oracle for the in-process render.
func helmCLI(t *testing.T, chartDir string, o *HelmOptions) []*unstructured.Unstructured {
	t.Helper()
	helm := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Helm })
	args := []string{"template", ".", "--name-template", o.ReleaseName}
	if o.Namespace != "" {
		args = append(args, "--namespace", o.Namespace)
	}
	if o.KubeVersion != "" {
		args = append(args, "--kube-version", o.KubeVersion)
	}
	for _, p := range o.Parameters {
		flag := "--set"
		if p.ForceString {
			flag = "--set-string"
		}
		args = append(args, flag, p.Name+"="+setValue(p.Value))
	}
	for _, p := range o.FileParameters {
		args = append(args, "--set-file", p.Name+"="+p.Value)
	}
	for _, f := range o.ValueFiles {
		args = append(args, "--values", f)
	}
	if o.Values != "" {
		f := filepath.Join(t.TempDir(), "values.yaml")
		require.NoError(t, os.WriteFile(f, []byte(o.Values), 0o644))
		args = append(args, "--values", f)
	}
	for _, v := range o.APIVersions {
		args = append(args, "--api-versions", v)
	}
	if !o.SkipCrds {
		args = append(args, "--include-crds")
	}
	if o.SkipTests {
		args = append(args, "--skip-tests")
	}
	cmd := exec.Command(helm, args...)
	cmd.Dir = chartDir
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), stderr.String())
	objs, err := decodeManifests("helm template", out)
	require.NoError(t, err)
	return objs
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

// TestHelmChartRendersAsTheHelmCLI renders a chart in Git (a subchart under charts/, CRDs, a
// .helmignore, files read by templates, hooks and a test, a template on the cluster's API
// versions) in process, with each kind of option Argo CD passes, and compares the objects with
// what the helm CLI prints for the same chart and flags.
func TestHelmChartRendersAsTheHelmCLI(t *testing.T) {
	chart, err := filepath.Abs("testdata/charts/demo")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dir, "charts/demo"), os.DirFS(chart)))
	writeTree(t, dir, map[string]string{"env/prod.yaml": "service:\n  port: 8443\n"})
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "chart")
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	snap, err := AtRevision(repo, "HEAD")
	require.NoError(t, err)
	tree, err := FromDir(dir)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		opts HelmOptions
		// cli is what the CLI is given when a path differs (relative to the chart)
		cliValueFiles []string
		want          []string
	}{
		// Argo CD always sends the cluster's version (without one, helm's default comes from
		// the client-go version in the binary's build information, which a test binary lacks).
		{name: "release name only", opts: HelmOptions{ReleaseName: "api", KubeVersion: "1.37.2"},
			want: []string{"CustomResourceDefinition/widgets.demo.example.com", "ConfigMap/api-demo-config", "Service/api-demo", "Deployment/api-demo", "Pod/api-demo-test", "Job/api-demo-migrate"}},
		{name: "every option", opts: HelmOptions{
			ReleaseName: "llm", Namespace: "llm-api", KubeVersion: "v1.36.1-gke.100",
			ValueFiles: []string{"values-prod.yaml", "/env/prod.yaml"},
			Values:     "image:\n  tag: \"2.0\"\n",
			Parameters: []HelmParameter{{Name: "cache.enabled", Value: "true"}, {Name: "hosts", Value: "{a.example.com,b.example.com}"},
				{Name: "env.NOTE", Value: "one,two"}, {Name: "env.FLAG", Value: "true", ForceString: true}},
			APIVersions: []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"},
			SkipCrds:    true, SkipTests: true,
		}, cliValueFiles: []string{"values-prod.yaml", "../../env/prod.yaml"},
			want: []string{"ConfigMap/llm-cache", "ConfigMap/llm-demo-config", "ConfigMap/llm-demo-hosts", "Service/llm-demo", "Deployment/llm-demo", "ServiceMonitor/llm-demo", "Job/llm-demo-migrate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := tc.opts
			if tc.cliValueFiles != nil {
				cli.ValueFiles = tc.cliValueFiles
			}
			want := helmCLI(t, filepath.Join(dir, "charts/demo"), &cli)
			assert.Equal(t, tc.want, names(want), "the CLI's objects")
			for src, s := range map[string]Source{"snapshot": snap, "work tree": tree} {
				res, err := Engine{}.Render(context.Background(), s, Target{Name: AppTarget("charts/demo"), Variant: Variant{Helm: &tc.opts}})
				require.NoError(t, err, src)
				if diff := cmp.Diff(want, res.Objects); diff != "" {
					t.Errorf("%s: in-process render differs from the helm CLI (-cli +auditor):\n%s", src, diff)
				}
			}
		})
	}
}

// TestHelmChartErrorsNameTheCause: what Argo CD would fetch or refuse is an error that says so.
func TestHelmChartErrorsNameTheCause(t *testing.T) {
	chart := "apiVersion: v2\nname: c\nversion: 0.1.0\n"
	dir := newRepo(t, map[string]string{
		"deps/Chart.yaml":         chart + "dependencies:\n  - name: redis\n    version: 1.0.0\n    repository: https://charts.example.com\n",
		"deps/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
		"plain/Chart.yaml":        chart,
		"plain/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name | required \"name is required\" }}\n",
		"lib/Chart.yaml":          chart + "type: library\n",
		"kube/Chart.yaml":         chart + "kubeVersion: \">=1.99.0\"\n",
		"kube/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
	})
	src, err := FromDir(dir)
	require.NoError(t, err)
	for _, tc := range []struct {
		path string
		opts HelmOptions
		want string
	}{
		{"deps", HelmOptions{}, "dependencies redis are in Chart.yaml but not under charts/"},
		{"plain", HelmOptions{ReleaseName: strings.Repeat("a", 54)}, "release name"},
		{"lib", HelmOptions{}, "library charts are not installable"},
		{"plain", HelmOptions{}, "name is required"},
		{"plain", HelmOptions{ValueFiles: []string{"missing.yaml"}, Values: "name: x\n"}, "values file missing.yaml: plain/missing.yaml does not exist"},
		{"plain", HelmOptions{ValueFiles: []string{"../../outside.yaml"}}, "outside the repository"},
		{"plain", HelmOptions{ValueFiles: []string{"https://example.com/v.yaml"}}, "is a URL"},
		{"plain", HelmOptions{ValueFiles: []string{"$values/v.yaml"}}, "names a source the Application does not have"},
		{"kube", HelmOptions{KubeVersion: "1.37.2"}, "chart requires kubeVersion: >=1.99.0"},
	} {
		_, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget(tc.path), Variant: Variant{Helm: &tc.opts}})
		require.Error(t, err, tc.path)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), "render "+tc.path)
	}
	res, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget("plain"), Variant: Variant{Helm: &HelmOptions{ValueFiles: []string{"missing.yaml"}, IgnoreMissingValueFiles: true, Values: "name: x\n"}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap/x"}, names(res.Objects))

	// What only the auditor cannot do is a LimitError (a check warning, not a violation).
	for _, tc := range []struct {
		path string
		opts HelmOptions
	}{{"deps", HelmOptions{}}, {"plain", HelmOptions{ValueFiles: []string{"https://example.com/v.yaml"}}},
		{"kube", HelmOptions{}}, {"plain", HelmOptions{FileParameters: []HelmParameter{{Name: "x", Value: "$values/x.txt"}}}}} {
		_, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget(tc.path), Variant: Variant{Helm: &tc.opts}})
		var limit *LimitError
		assert.ErrorAs(t, err, &limit, "%s %+v", tc.path, tc.opts)
	}
	_, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("kube"), Variant: Variant{Helm: &HelmOptions{KubeVersion: "1.37.2"}}})
	var limit *LimitError
	assert.False(t, errors.As(err, &limit), "the destination's version said no: Argo CD fails too")
}

// TestHelmValueFileGlobsInArgoCDsOrder: a glob expands in the order a walk of sorted directories
// finds the files (doublestar, as Argo CD), so envs/prod/ comes before envs/prod-eu/ and a later
// file wins; ** crosses directories; an explicit entry keeps its own place.
func TestHelmValueFileGlobsInArgoCDsOrder(t *testing.T) {
	src := snapshotSource(t, map[string]string{
		"c/Chart.yaml":                "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/templates/cm.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  region: {{ .Values.region | quote }}\n  tier: {{ .Values.tier | quote }}\n",
		"envs/prod/values.yaml":       "region: prod\ntier: a\n",
		"envs/prod-eu/values.yaml":    "region: prod-eu\n",
		"envs/deep/x/y/values.yaml":   "tier: deep\n",
		"envs/prod/extra/values.yaml": "tier: extra\n",
	}, "r1")
	data := func(o HelmOptions) map[string]any {
		t.Helper()
		res, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget("c"), Variant: Variant{Helm: &o}})
		require.NoError(t, err)
		return res.Objects[0].Object["data"].(map[string]any)
	}
	assert.Equal(t, map[string]any{"region": "prod-eu", "tier": "a"}, data(HelmOptions{ValueFiles: []string{"/envs/*/values.yaml"}}))
	assert.Equal(t, map[string]any{"region": "prod-eu", "tier": "extra"}, data(HelmOptions{ValueFiles: []string{"/envs/prod*/**/values.yaml"}}),
		"envs/prod/extra/values.yaml after envs/prod/values.yaml, envs/prod-eu last")
	assert.Equal(t, map[string]any{"region": "prod", "tier": "a"}, data(HelmOptions{ValueFiles: []string{"/envs/*/values.yaml", "/envs/prod/values.yaml"}}),
		"an explicit entry keeps its place after the glob")
}

// TestHelmHooksWithGenerateNameAndExplicitHelm: a hook with only a generateName renders (Argo CD
// creates one per sync); helm named as the source type renders the chart even beside a
// kustomization, which wins otherwise.
func TestHelmHooksWithGenerateNameAndExplicitHelm(t *testing.T) {
	src := snapshotSource(t, map[string]string{
		"c/Chart.yaml":         "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/templates/job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n  annotations: {argocd.argoproj.io/hook: PreSync}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: x:1}]}}}\n",
		"c/kustomization.yaml": "resources: [cm.yaml]\n",
		"c/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\n",
	}, "r1")
	res, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget("c"), Variant: Variant{Helm: &HelmOptions{ReleaseName: "a", Explicit: true}}})
	require.NoError(t, err)
	require.Len(t, res.Objects, 1)
	assert.Equal(t, "migrate-", res.Objects[0].GetGenerateName())
	res, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("c"), Variant: Variant{Helm: &HelmOptions{ReleaseName: "a"}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap/k"}, names(res.Objects), "no helm options named: the kustomization")
}

// TestHelmRenderThroughTheWorkerAndTheCache: a chart rendered by a worker process gives what the
// in-process render gives, with the options sent along; a render with other options is another
// cache entry (even at another revision of the same files), and the same options are answered
// from the cache by content without a worker.
func TestHelmRenderThroughTheWorkerAndTheCache(t *testing.T) {
	files := map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"chart/values.yaml":       "replicas: 1\n",
		"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
	}
	three := &HelmOptions{ReleaseName: "a", Parameters: []HelmParameter{{Name: "replicas", Value: "3"}}}
	five := &HelmOptions{ReleaseName: "a", Parameters: []HelmParameter{{Name: "replicas", Value: "5"}}}
	target := AppTarget("chart")
	want, err := Engine{}.Render(context.Background(), snapshotSource(t, files, "r1"), Target{Name: target, Variant: Variant{Helm: three}})
	require.NoError(t, err)
	require.Equal(t, "3", want.Objects[0].Object["data"].(map[string]any)["replicas"])

	c := NewCache("", 4)
	c.Worker = NewWorker()
	got, err := Engine{Cache: c}.Render(context.Background(), snapshotSource(t, files, "r1"), Target{Name: target, Variant: Variant{Helm: three}})
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.Worker.Started())
	if d := cmp.Diff(want.Objects, got.Objects); d != "" {
		t.Errorf("(-in process +worker):\n%s", d)
	}
	other, err := Engine{Cache: c}.Render(context.Background(), snapshotSource(t, files, "r2"), Target{Name: target, Variant: Variant{Helm: five}})
	require.NoError(t, err)
	assert.Equal(t, "5", other.Objects[0].Object["data"].(map[string]any)["replicas"], "other options are not answered by content")
	assert.EqualValues(t, 2, c.Worker.Started())
	again, err := Engine{Cache: c}.Render(context.Background(), snapshotSource(t, files, "r3"), Target{Name: target, Variant: Variant{Helm: three}})
	require.NoError(t, err)
	assert.Equal(t, "3", again.Objects[0].Object["data"].(map[string]any)["replicas"])
	assert.EqualValues(t, 2, c.Worker.Started(), "the same files and options: answered by content")
}
