package audit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

func TestFreshSyncIsInSync(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	rep := f.audit()
	if !rep.InSync || len(rep.Objects) != 0 || rep.PendingSync {
		t.Fatalf("fresh sync of prod should be in sync:\n%s", dump(rep))
	}
	if rep.Revision != f.Head {
		t.Errorf("audited revision %s, want synced %s", rep.Revision, f.Head)
	}
}

func TestKubectlEditReplicas(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	rep := f.audit()
	o := object(t, rep, "StatefulSet", "qdrant")
	fl := field(t, rep, o, ".spec.replicas")
	want := drift.Field{Path: ".spec.replicas", Desired: int64(1), Live: int64(3), Change: drift.Changed,
		Writer: drift.Writer{Manager: "kubectl-edit", Operation: "Update", Time: fl.Time}}
	if diff := cmp.Diff(want, fl, cmpopts.IgnoreFields(drift.Field{}, "FieldPath")); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if ts, err := time.Parse(time.RFC3339, fl.Time); err != nil || time.Since(ts) > 5*time.Minute {
		t.Errorf("time %q is not a recent RFC 3339 time", fl.Time)
	}
	if o.Status != drift.Modified || rep.InSync {
		t.Errorf("status %s inSync %v, want Modified, false", o.Status, rep.InSync)
	}
}

func TestKubectlScaleIsSubresourceScale(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("rag"), "scale", "statefulset/qdrant", "--replicas=2")
	rep := f.audit()
	fl := field(t, rep, object(t, rep, "StatefulSet", "qdrant"), ".spec.replicas")
	if fl.Manager != "kubectl" || fl.Subresource != "scale" || fl.Operation != "Update" || fl.Live != int64(2) {
		t.Errorf("got manager %q subresource %q operation %q live %v, want kubectl/scale/Update/2", fl.Manager, fl.Subresource, fl.Operation, fl.Live)
	}
}

func TestKubectlSetImage(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("api"), "set", "image", "deployment/rag-api", "api=registry.example.com/llm/rag-api:1.4.3")
	rep := f.audit()
	fl := field(t, rep, object(t, rep, "Deployment", "rag-api"), ".spec.template.spec.containers[name=api].image")
	if fl.Manager != "kubectl-set" || fl.Change != drift.Changed || fl.Desired != "registry.example.com/llm/rag-api:1.4.2" || fl.Live != "registry.example.com/llm/rag-api:1.4.3" {
		t.Errorf("got %+v", fl)
	}
}

func TestKubectlSetEnvIsAdded(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("api"), "set", "env", "deployment/rag-api", "LOG_LEVEL=debug")
	rep := f.audit()
	fl := field(t, rep, object(t, rep, "Deployment", "rag-api"), ".spec.template.spec.containers[name=api].env[name=LOG_LEVEL]")
	want := map[string]any{"name": "LOG_LEVEL", "value": "debug"}
	if fl.Change != drift.Added || fl.Manager != "kubectl-set" || fl.Desired != nil || !cmp.Equal(fl.Live, want) {
		t.Errorf("got %+v", fl)
	}
}

func TestKubectlLabelAndAnnotateAreAdded(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("api"), "label", "deployment/rag-api", "team=search")
	f.Kubectl("-n", f.NS("api"), "annotate", "service/rag-api", "note=debugging")
	rep := f.audit()
	l := field(t, rep, object(t, rep, "Deployment", "rag-api"), ".metadata.labels.team")
	if l.Change != drift.Added || l.Live != "search" || l.Manager != "kubectl-label" {
		t.Errorf("label: got %+v", l)
	}
	a := field(t, rep, object(t, rep, "Service", "rag-api"), ".metadata.annotations.note")
	if a.Change != drift.Added || a.Live != "debugging" || a.Manager != "kubectl-annotate" {
		t.Errorf("annotation: got %+v", a)
	}
}

func TestKubectlPatchRemovingTolerationIsRemoved(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("inference"), "patch", "deployment/vllm-llama", "--type=json",
		`-p=[{"op":"remove","path":"/spec/template/spec/tolerations/0"}]`)
	rep := f.audit()
	o := object(t, rep, "Deployment", "vllm-llama")
	var found bool
	for _, fl := range o.Fields {
		if strings.HasPrefix(fl.Path, ".spec.template.spec.tolerations") && fl.Change == drift.Removed {
			found = true
			// A removal leaves no managedFields entry (kubectl-patch owns nothing afterwards), so
			// nobody can be named; the applier must not be blamed either.
			if fl.Manager != "" {
				t.Errorf("removed toleration attributed to %q, want unknown", fl.Manager)
			}
			if !strings.Contains(fmt.Sprint(fl.Desired), "key:nvidia.com/gpu") || fl.Live != nil {
				t.Errorf("removed: desired %v live %v, want the nvidia.com/gpu toleration and nothing", fl.Desired, fl.Live)
			}
		}
	}
	if !found {
		t.Fatalf("no removed toleration:\n%s", dump(rep))
	}
}

func TestKubectlDeleteServiceIsMissing(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("api"), "delete", "service", "rag-api")
	rep := f.audit()
	if o := object(t, rep, "Service", "rag-api"); o.Status != drift.Missing {
		t.Errorf("status %s, want Missing", o.Status)
	}
}

func TestKubectlCreateConfigMapIsExtra(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("api"), "create", "configmap", "hotfix", "--from-literal=k=v")
	// Give the controller-manager time to create its own objects (kube-root-ca.crt, default SA,
	// ReplicaSets, PVCs) in these namespaces: none of them may be reported.
	time.Sleep(2 * time.Second)
	rep := f.audit()
	o := object(t, rep, "ConfigMap", "hotfix")
	if o.Status != drift.Extra || o.Creator == nil || o.Creator.Manager != "kubectl-create" {
		t.Errorf("got %+v", o)
	}
	for _, o := range rep.Objects {
		if o.Status == drift.Extra && o.Name != "hotfix" {
			t.Errorf("false Extra: %s %s/%s", o.Kind, o.Namespace, o.Name)
		}
	}
}

func TestReplicasOwnedByAutoscalerAreNotDrift(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	cs, err := cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	// rag-api has no replicas in Git and a real HPA (prod: minReplicas 3): kube-controller-manager
	// scales it up through the scale subresource, without a metrics server.
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		d, err := cs.AppsV1().Deployments(f.NS("api")).Get(ctx, "rag-api", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 3 { // Git has none: the default is 1
			break
		}
		if time.Now().After(deadline) {
			var managers []string
			for _, e := range d.ManagedFields {
				managers = append(managers, e.Manager+"/"+e.Subresource)
			}
			t.Fatalf("the HPA did not scale rag-api to 3: replicas %d, managers %v", *d.Spec.Replicas, managers)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// vllm-qwen is KEDA-scaled and its replicas are in the Application's ignoreDifferences:
	// even a manual kubectl scale is not drift there, as Argo CD would not flag it either.
	f.Kubectl("-n", f.NS("inference"), "scale", "deployment/vllm-qwen", "--replicas=6")
	rep := f.audit()
	if !rep.InSync {
		t.Fatalf("HPA-owned and ignored replicas reported as drift:\n%s", dump(rep))
	}
	// kubectl scale of replicas Git leaves out, with no autoscaler, is
	// TestKubectlScaleOfReplicasGitLeavesOut; of a Git-declared count, TestKubectlScaleIsSubresourceScale.
}

func TestQuantitySpellingsAreNotDrift(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Edit("base/api/rag-api.yaml", `cpu: "1"`, `cpu: 1000m`)
	f.Edit("base/api/rag-api.yaml", "memory: 1Gi", "memory: 1024Mi")
	f.Sync(f.Commit("spell quantities differently"))
	rep := f.audit()
	if !rep.InSync {
		t.Fatalf("1000m vs 1 / 1024Mi vs 1Gi reported as drift:\n%s", dump(rep))
	}
}

func TestCommitAheadIsPendingSyncNotDrift(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	synced := f.Head
	f.Edit("base/api/rag-api.yaml", "rag-api:1.4.2", "rag-api:1.5.0")
	f.Edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.5.0")
	head := f.Commit("rag-api 1.5.0")
	rep := f.audit()
	if !rep.InSync || !rep.PendingSync || rep.Revision != synced || rep.HeadRevision != head {
		t.Fatalf("want in sync with pendingSync, revision %s, head %s; got:\n%s", synced, head, dump(rep))
	}
}

func TestSecretEditedByHandIsReportedWithoutValues(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	const gitValue, liveValue = "git-value-7f3a9c", "live-value-c0ffee"
	if err := f.Write("base/api/secret.yaml", fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: rag-api-token
  namespace: %s
stringData:
  token: %s
`, f.NS("api"), gitValue)); err != nil {
		t.Fatal(err)
	}
	f.Edit("base/api/kustomization.yaml", "resources:", "resources:\n  - secret.yaml")
	f.Sync(f.Commit("add a secret"))
	if rep := f.audit(); !rep.InSync {
		t.Fatalf("secret from stringData reported as drift:\n%s", dump(rep))
	}
	patch := fmt.Sprintf(`{"data":{"token":"%s"}}`, base64.StdEncoding.EncodeToString([]byte(liveValue)))
	f.Kubectl("-n", f.NS("api"), "patch", "secret", "rag-api-token", "-p", patch)
	rep := f.audit()
	fl := field(t, rep, object(t, rep, "Secret", "rag-api-token"), ".data.token")
	if fl.Change != drift.Changed || fl.Manager != "kubectl-patch" || fl.Desired == fl.Live {
		t.Errorf("got %+v", fl)
	}
	out, _ := json.Marshal(rep)
	bin := buildAuditor(t)
	cli, _ := runAuditor(t, bin, "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--argocd-namespace", "argocd")
	// The API server's audit log, written with the platform's policy, has the writes but not the
	// values (nor any service-account token).
	auditLog, err := os.ReadFile(cluster.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(auditLog), `"name":"rag-api-token"`) {
		t.Errorf("the audit log has no event for the secret's writes")
	}
	if strings.Contains(string(auditLog), `"token":"ey`) {
		t.Errorf("the audit log holds a service-account token")
	}
	for _, secret := range []string{gitValue, liveValue} {
		for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))} {
			if strings.Contains(string(out), form) || strings.Contains(cli, form) {
				t.Errorf("report carries a secret value (%q)", form)
			}
			if strings.Contains(string(auditLog), form) {
				t.Errorf("the audit log carries a secret value (%q)", form)
			}
		}
	}
}

// TestKubectlDiffOracle makes every kind of edit, then checks that `kubectl diff --server-side`
// (as the applier) names the same differing objects as the auditor, leaving out Extra objects and
// objects whose only drift is fields added by other managers, which a server-side apply keeps.
func TestKubectlDiffOracle(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	f.Kubectl("-n", f.NS("api"), "set", "image", "deployment/rag-api", "api=registry.example.com/llm/rag-api:1.4.3")
	f.Kubectl("-n", f.NS("inference"), "set", "env", "deployment/vllm-llama", "EXTRA=1")
	f.Kubectl("-n", f.NS("inference"), "label", "service/vllm-llama", "team=x")
	f.Kubectl("-n", f.NS("inference"), "patch", "deployment/vllm-qwen-canary", "--type=json",
		`-p=[{"op":"remove","path":"/spec/template/spec/tolerations/0"}]`)
	f.Kubectl("-n", f.NS("rag"), "delete", "service", "qdrant")
	f.Kubectl("-n", f.NS("api"), "create", "configmap", "hotfix", "--from-literal=k=v")
	// A key added to an atomic map: the Service selector now matches no pod Git means.
	f.Kubectl("-n", f.NS("api"), "patch", "service/rag-api", `-p={"spec":{"selector":{"track":"shadow"}}}`)
	// Git's own object plus one env var, server-side applied under the applier's name.
	f.KubectlApplyAsApplier("Deployment", f.NS("inference"), "vllm-qwen", func(o map[string]any) {
		c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["env"] = append(c["env"].([]any), map[string]any{"name": "VLLM_DEBUG", "value": "1"})
	})
	rep := f.audit()

	theirs := kubectlDiff(t, f)
	assert.Empty(t, oracleMismatch(rep, theirs,
		// Added by other managers: a server-side apply keeps them, so kubectl diff shows nothing.
		"Deployment/vllm-llama .spec.template.spec.containers[name=vllm].env[name=EXTRA]",
		// kubectl set env sets it on the init containers too (weights-ready)
		"Deployment/vllm-llama .spec.template.spec.initContainers[name=weights-ready].env[name=EXTRA]",
		"Service/vllm-llama .metadata.labels.team",
	), "field paths differ from kubectl diff --server-side; report:\n%s", dump(rep))
	var objs []string
	for id := range theirs {
		objs = append(objs, id)
	}
	sort.Strings(objs)
	want := []string{
		"Deployment/" + f.NS("api") + "/rag-api",                // image
		"Deployment/" + f.NS("inference") + "/vllm-qwen",        // env var applied as the applier
		"Deployment/" + f.NS("inference") + "/vllm-qwen-canary", // toleration removed
		"Service/" + f.NS("api") + "/rag-api",                   // selector key
		"Service/" + f.NS("rag") + "/qdrant",                    // deleted
		"StatefulSet/" + f.NS("rag") + "/qdrant",                // replicas
	}
	assert.Equal(t, want, objs, "kubectl diff itself: env var and label added by hand are invisible to it")
}

// TestHTTPRouteWeightsChangedLive is the ledger's live check: canary shares changed by hand in
// the cluster differ from the synced revision's, and are reported as such; the API server's
// defaulted weight (1) on a route Git leaves unweighted is not.
func TestHTTPRouteWeightsChangedLive(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("-n", f.NS("inference"), "patch", "httproute", "qwen", "--type=json",
		`-p=[{"op":"replace","path":"/spec/rules/0/backendRefs/0/weight","value":50},{"op":"replace","path":"/spec/rules/0/backendRefs/1/weight","value":50}]`)
	rep := f.audit()
	o := object(t, rep, "HTTPRoute", "qwen")
	var paths []string
	for _, fl := range o.Fields {
		paths = append(paths, fl.Path+" "+fl.Change+" "+fl.Manager)
	}
	// rules and backendRefs are atomic lists in the Gateway API schema: items are positions.
	want := []string{
		".spec.rules[0].backendRefs[0].weight changed kubectl-patch",
		".spec.rules[0].backendRefs[1].weight changed kubectl-patch",
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestAuditWithReadOnlyRights runs the audit as a user bound only to the ClusterRole base/auditor
// ships (get/list/watch): it sees the drift, and that user cannot change anything.
// TestAuditWithReadOnlyRights audits as the auditor's own ServiceAccount, with exactly the RBAC
// the repository ships (enumerated kinds; namespaced reads, Secrets included, only in the
// platform's namespaces; Applications and argocd-cm in Argo CD's) and the informers scoped the
// way the shipped config scopes them. The audit must see every object and find a hand edit; the
// account must not be able to write, nor read Secrets anywhere else.
func TestAuditWithReadOnlyRights(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	f.Kubectl("apply", "--server-side", "-k", filepath.Join(f.Dir, "apps", "common"))
	t.Cleanup(func() {
		_, _ = cluster.Kubectl(context.Background(), "delete", "-k", filepath.Join(f.Dir, "apps", "common")).CombinedOutput()
	})
	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)

	sa := "system:serviceaccount:" + f.NS("system") + ":auditor"
	as := rest.CopyConfig(cluster.Config)
	as.Impersonate = rest.ImpersonationConfig{UserName: sa}
	ctx := context.Background()
	repo, err := gitrepo.Open(f.Dir)
	require.NoError(t, err)
	cache, err := live.New(ctx, as)
	require.NoError(t, err)
	var namespaces []string
	for _, layer := range []string{"inference", "api", "rag", "batch", "monitoring", "system"} {
		namespaces = append(namespaces, f.NS(layer))
	}
	cache.ScopeTo(namespaces, map[schema.GroupVersionKind][]string{argocd.ApplicationGVK: {"argocd"}})
	a := New(Config{Repo: repo, Live: cache})
	a.AppName = func(string) string { return f.App() }
	a.SyncTimeout = 20 * time.Second // a kind the role misses fails the audit, naming it
	rep, err := a.Run(ctx, Request{Env: "prod"})
	require.NoError(t, err, "audit as %s", sa)
	field(t, rep, object(t, rep, "StatefulSet", "qdrant"), ".spec.replicas")
	for _, o := range rep.Objects {
		assert.NotEqual(t, drift.Unknown, o.Status, "%s %s/%s: %s", o.Kind, o.Namespace, o.Name, o.Note)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", f.NS("rag"), "patch", "statefulsets/qdrant"}, "no"},
		{[]string{"-n", f.NS("api"), "list", "secrets"}, "yes"},
		{[]string{"-n", "default", "list", "secrets"}, "no"},
		{[]string{"-n", "argocd", "list", "secrets"}, "no"},
		{[]string{"--all-namespaces", "list", "secrets"}, "no"},
		{[]string{"--all-namespaces", "list", "configmaps"}, "no"},
		{[]string{"-n", "argocd", "list", "applications.argoproj.io"}, "yes"},
	} {
		out, _ := cluster.Kubectl(ctx, append([]string{"auth", "can-i", "--as=" + sa}, c.args...)...).CombinedOutput()
		assert.Equal(t, c.want, strings.TrimSpace(string(out)), "kubectl auth can-i %v", c.args)
	}
}

// TestShippedRBACIsEnumerated: no wildcard in any rule the repository grants.
func TestShippedRBACIsEnumerated(t *testing.T) {
	for _, dir := range []string{"overlays/prod", "apps/prod"} {
		src, err := render.FromDir("../../..")
		require.NoError(t, err)
		res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: render.AppTarget(dir)})
		require.NoError(t, err)
		for _, o := range res.Objects {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				for _, k := range []string{"apiGroups", "resources", "verbs", "nonResourceURLs"} {
					vals, _, _ := unstructured.NestedStringSlice(r.(map[string]any), k)
					assert.NotContains(t, vals, "*", "%s %s: %s", o.GetKind(), o.GetName(), k)
				}
			}
		}
	}
}
