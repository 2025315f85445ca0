package e2e

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/platform/cost"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// TestVerdictAgreesWithArgoCDStatus makes hand edits with the real kubectl and compares the
// objects the auditor calls drifted with the resources real Argo CD (server-side diff on) calls
// OutOfSync in the Application's status. The two sets are equal except for the classes the
// auditor sees and Argo CD cannot, listed here by name: fields added by hand outside what Git
// declares, and objects Git does not have (Argo CD does not track them).
func TestVerdictAgreesWithArgoCDStatus(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	inference, api, rag, sys := f.NS("inference"), f.NS("api"), f.NS("rag"), f.NS("system")
	f.KubectlEdit(rag, "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	f.Kubectl("-n", api, "patch", "deploy/rag-api", "--field-manager=argocd-controller",
		`-p={"spec":{"template":{"spec":{"containers":[{"name":"api","image":"registry.example.com/llm/rag-api:6.6.6"}]}}}}`)
	f.Kubectl("-n", inference, "set", "env", "deploy/vllm-qwen", "-c", "vllm", "HF_HUB_OFFLINE-")
	f.Kubectl("-n", inference, "patch", "deploy/vllm-llama", "--type=json", `-p=[`+
		`{"op":"remove","path":"/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu"},`+
		`{"op":"remove","path":"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"}]`)
	f.Kubectl("-n", inference, "annotate", "--overwrite", "deploy/vllm-llama", "argocd.argoproj.io/sync-wave=1.0")
	f.Kubectl("-n", rag, "delete", "service", "qdrant")
	f.Kubectl("-n", inference, "patch", "httproute/qwen", "--type=json", // the canary's share, by hand
		`-p=[{"op":"replace","path":"/spec/rules/0/backendRefs/0/weight","value":50},{"op":"replace","path":"/spec/rules/0/backendRefs/1/weight","value":50}]`)
	// Neither calls this drift: the Application's ignoreDifferences leaves /spec/replicas of the
	// vLLM Deployments to KEDA, and the auditor applies them as Argo CD does.
	f.Kubectl("-n", inference, "scale", "deploy/vllm-qwen-canary", "--replicas=2")
	// A higher floor for qwen's autoscaler: drift for both, which costs GPUs whatever the load.
	f.Kubectl("-n", inference, "patch", "scaledobject/vllm-qwen", "--type=merge", `-p={"spec":{"minReplicaCount":4}}`)
	// Seen by the auditor only:
	f.Kubectl("-n", inference, "label", "service/vllm-qwen", "hand=edited")                         // a label Git does not declare
	f.Kubectl("-n", sys, "patch", "configmap/auditor-config", `-p={"data":{"hotfix.yaml":"x: 1"}}`) // a key Git does not declare
	f.Kubectl("-n", api, "create", "configmap", "hotfix", "--from-literal=k=v")                     // an object Git does not have
	f.Refresh()

	rep := auditEnv(t, f)
	// The auditor's own findings: objects it lists only because Argo CD flags them do not count.
	require.Empty(t, rep.ArgoCDOnly, "objects only Argo CD flags:\n%s", dump(rep))
	ours := map[string]bool{}
	for _, o := range rep.Objects {
		if o.Status == drift.Modified || o.Status == drift.Missing || o.Status == drift.Extra {
			ours[o.Kind+" "+o.Namespace+"/"+o.Name] = true
		}
	}
	theirs := map[string]bool{}
	resources, _, _ := unstructured.NestedSlice(f.Application().Object, "status", "resources")
	for _, r := range resources {
		m := r.(map[string]any)
		if m["status"] == "OutOfSync" {
			ns, _ := m["namespace"].(string)
			theirs[m["kind"].(string)+" "+ns+"/"+m["name"].(string)] = true
		}
	}
	onlyOurs := []string{
		"ConfigMap " + sys + "/auditor-config", // added key
		"ConfigMap " + api + "/hotfix",         // not in Git, not tracked
		"Service " + inference + "/vllm-qwen",  // added label
	}
	assert.Empty(t, cmp.Diff(keys(theirs), minus(keys(ours), onlyOurs)), "auditor's drifted objects (-Argo CD +auditor):\n%s", dump(rep))
	for _, k := range onlyOurs {
		assert.True(t, ours[k], "the auditor misses %s", k)
	}
	for _, o := range rep.Objects {
		require.NotNil(t, o.ArgoCD, "%s %s has no Argo CD verdict", o.Kind, o.Name)
		assert.Equal(t, drift.VerdictApplicationStatus, o.ArgoCD.Source, "%s %s: the verdict should be Argo CD's own status", o.Kind, o.Name)
		assert.Equal(t, theirs[o.Kind+" "+o.Namespace+"/"+o.Name], o.ArgoCD.OutOfSync, "%s %s", o.Kind, o.Name)
	}
	sync, _, _ := unstructured.NestedString(f.Application().Object, "status", "sync", "status")
	assert.Equal(t, "OutOfSync", sync)
	// The GPU taken off vllm-llama by hand, at the price the platform's rule states for its card;
	// qwen's floor raised from 2 to 4.
	costed := map[string]bool{}
	for _, o := range rep.Objects {
		if o.Kind == "ScaledObject" && o.Name == "vllm-qwen" {
			require.NotNil(t, o.Cost, "%+v", o.Fields)
			costed[o.Kind] = true
			assert.Equal(t, int64(2), o.Cost.GPUs, o.Cost.Note)
			assert.Contains(t, o.Cost.Note, "minimum replicas of vllm-qwen 2 → 4 on l40s: at least +2 GPUs")
		}
		if o.Kind == "Deployment" && o.Name == "vllm-llama" {
			require.NotNil(t, o.Cost, "%+v", o.Fields)
			price := -1.86
			assert.Equal(t, drift.Cost{GPUs: -1, Card: "l40s", USDPerHour: &price,
				Note: "nvidia.com/gpu 1 → 0 per pod on l40s: -1 GPUs, about -1.86 USD per hour at the stated price"}, *o.Cost)
			costed[o.Kind] = true
		}
	}
	assert.Equal(t, map[string]bool{"ScaledObject": true, "Deployment": true}, costed, "the two hand edits that cost GPUs")
}

// audit runs the auditor in-process, the way `auditor diff` does.
func auditEnv(t *testing.T, f *testfixture.Platform) *drift.Report {
	t.Helper()
	return runAudit(t, newAuditor(t, f), f.Env)
}

// newAuditor audits the fixture's env against the cluster, its live cache watching for the test.
func newAuditor(t *testing.T, f *testfixture.Platform) *audit.Auditor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	repo, err := gitrepo.Open(f.Dir)
	require.NoError(t, err)
	cache, err := live.New(ctx, cluster.Config)
	require.NoError(t, err)
	a := audit.New(audit.Config{Repo: repo, Live: cache, Steps: []drift.Step{cost.Step{}}})
	a.AppName = func(string) string { return f.App() }
	return a
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func minus(all, drop []string) []string {
	out := []string{}
	for _, k := range all {
		if !slices.Contains(drop, k) {
			out = append(out, k)
		}
	}
	return out
}

func dump(rep *drift.Report) string {
	data, _ := yaml.Marshal(rep)
	return string(data)
}
