package render

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// renderApps renders what an env's app-of-apps syncs (apps/<env>).
func renderApps(t *testing.T, env string) []*unstructured.Unstructured {
	t.Helper()
	src, err := FromDir("../../..")
	require.NoError(t, err)
	res, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget("apps/" + env)})
	require.NoError(t, err, "render apps/%s", env)
	return res.Objects
}

func application(t *testing.T, objs []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Application" && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no Application %s", name)
	return nil
}

func wave(o *unstructured.Unstructured) int {
	w, err := strconv.Atoi(o.GetAnnotations()["argocd.argoproj.io/sync-wave"])
	if err != nil {
		return 0 // Argo CD's default
	}
	return w
}

// TestGPUStackApplication: every env's cluster gets the GPU Operator from its Helm repository at a
// pinned chart version, before the env's workloads, with the values the platform relies on, and
// exactly one DCGM exporter (the repository's DaemonSet, not the operator's as well).
func TestGPUStackApplication(t *testing.T) {
	pinned := regexp.MustCompile(`^v?\d+\.\d+\.\d+$`)
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			objs := renderApps(t, env)
			op := application(t, objs, "gpu-operator")
			platform := application(t, objs, "llm-"+env)
			src := func(field string) string {
				v, _, _ := unstructured.NestedString(op.Object, "spec", "source", field)
				return v
			}
			assert.Equal(t, "https://helm.ngc.nvidia.com/nvidia", src("repoURL"))
			assert.Equal(t, "gpu-operator", src("chart"))
			assert.Regexp(t, pinned, src("targetRevision"), "chart version pinned, not a range")
			assert.Less(t, wave(op), wave(platform), "the GPU stack syncs before %s", platform.GetName())

			values, _, _ := unstructured.NestedMap(op.Object, "spec", "source", "helm", "valuesObject")
			off := func(path ...string) {
				v, found, _ := unstructured.NestedBool(values, path...)
				assert.True(t, found && !v, "values %v must be false", path)
			}
			off("driver", "enabled")  // the AMI ships the driver
			off("toolkit", "enabled") // and the container toolkit
			off("dcgmExporter", "enabled")
			off("migManager", "enabled")
			cfg, _, _ := unstructured.NestedString(values, "devicePlugin", "config", "name")
			assert.Empty(t, cfg, "no device plugin sharing config: time-slicing off")
			tols, _, _ := unstructured.NestedSlice(values, "daemonsets", "tolerations")
			require.Len(t, tols, 1)
			assert.Equal(t, "nvidia.com/gpu", tols[0].(map[string]any)["key"], "operands tolerate the GPU pool's taint")

			var exporters []string
			for _, o := range renderRepo(t, env).Objects {
				if o.GetKind() == "DaemonSet" && o.GetName() == "dcgm-exporter" {
					exporters = append(exporters, o.GetNamespace()+"/"+o.GetName())
				}
			}
			assert.Equal(t, []string{"llm-monitoring/dcgm-exporter"}, exporters)
		})
	}
}

// TestAppsAcceptedByAPIServer server-side dry-runs what each env's app-of-apps syncs (its
// AppProjects, its Application, the policies' and the GPU Operator's, the auditor's read access
// in argocd) and the app-of-apps itself (clusters/<env>/root.yaml) against the real API
// server with Argo CD's CRDs: a misspelt source or sync policy is refused here, not by a cluster.
func TestAppsAcceptedByAPIServer(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	syncer, err := testcluster.NewSyncer(cluster.Config)
	require.NoError(t, err)
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": testcluster.ArgoCDNamespace}}}
	require.NoError(t, syncer.Sync(ctx, "apps", []*unstructured.Unstructured{ns}, false))
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			objs := append(renderApps(t, env), rootApplication(t, env))
			require.NoError(t, syncer.Sync(ctx, "root-"+env, objs, true))
		})
	}
}

// TestUpstreamCRDsValidateNodeClasses shows the EC2NodeClass CRD (from karpenter-provider-aws's
// module) and the NodePool CRD do validate what the overlays render: a malformed AMI alias, a root
// volume size AWS does not take and a budget schedule without a duration are refused, server-side
// dry-run.
func TestUpstreamCRDsValidateNodeClasses(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	syncer, err := testcluster.NewSyncer(cluster.Config)
	require.NoError(t, err)
	breaks := []struct {
		kind, name string
		field      []string
		value      any
		want       string
	}{
		{"EC2NodeClass", "gpu", []string{"spec", "amiSelectorTerms"}, []any{map[string]any{"alias": "al2023"}}, "'alias' is improperly formatted"},
		{"EC2NodeClass", "gpu", []string{"spec", "blockDeviceMappings"}, []any{map[string]any{"deviceName": "/dev/xvda", "rootVolume": true,
			"ebs": map[string]any{"volumeSize": "200GB"}}}, "volumeSize"},
		{"NodePool", "gpu", []string{"spec", "disruption", "budgets"}, []any{map[string]any{"nodes": "0", "schedule": "0 5 * * 1-5"}}, "'schedule' must be set with 'duration'"},
	}
	objs := renderRepo(t, "prod").Objects
	for _, b := range breaks {
		var obj *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == b.kind && o.GetName() == b.name {
				obj = o.DeepCopy()
			}
		}
		require.NotNil(t, obj, "prod renders no %s %s", b.kind, b.name)
		require.NoError(t, syncer.Sync(ctx, "llm-prod", []*unstructured.Unstructured{obj}, true), "%s %s as rendered", b.kind, b.name)
		require.NoError(t, unstructured.SetNestedField(obj.Object, b.value, b.field...))
		err := syncer.Sync(ctx, "llm-prod", []*unstructured.Unstructured{obj}, true)
		if assert.Error(t, err, "%s %s with %v = %v", b.kind, b.name, b.field, b.value) {
			assert.Contains(t, err.Error(), b.want)
		}
	}
}
