package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/manifest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// bareEnv is a small env of a test's own: manifests as most users write them (no annotations),
// in overlays/<env> of a Git repository, in a namespace of its own, synced by the harness's
// applier with Argo CD's label tracking (no tracking annotation either).
type bareEnv struct {
	t        *testing.T
	dir, env string
	ns       string
}

func newBareEnv(t *testing.T, manifests string) *bareEnv {
	t.Helper()
	e := &bareEnv{t: t, dir: t.TempDir(), env: "bare", ns: fmt.Sprintf("bare-%06x", rand.Uint32()&0xffffff)}
	docs := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + e.ns + "}\n---\n" + strings.ReplaceAll(manifests, "NAMESPACE", e.ns)
	write := func(rel, data string) {
		p := filepath.Join(e.dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	}
	write("overlays/bare/objects.yaml", docs)
	write("overlays/bare/kustomization.yaml", "resources: [objects.yaml]\n")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "bare"}} {
		out, err := exec.Command("git", append([]string{"-C", e.dir}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	objs, err := manifest.Decode([]byte(docs))
	require.NoError(t, err)
	s, err := testcluster.NewSyncer(cluster.Config)
	require.NoError(t, err)
	s.LabelTracking = true
	require.NoError(t, s.Sync(context.Background(), "bare-"+e.ns, objs, false))
	return e
}

// auditor returns an Auditor of the env (no Argo CD Application: the branch head is desired).
func (e *bareEnv) auditor(ctx context.Context) *Auditor {
	e.t.Helper()
	repo, err := gitrepo.Open(e.dir)
	require.NoError(e.t, err)
	cache, err := live.New(ctx, cluster.Config)
	require.NoError(e.t, err)
	a := New(Config{Repo: repo, Live: cache})
	a.AppName = func(string) string { return "bare-" + e.ns }
	return a
}

func (e *bareEnv) audit(opts ...func(*Auditor)) *drift.Report {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := e.auditor(ctx)
	for _, o := range opts {
		o(a)
	}
	rep, err := a.Run(ctx, Request{Env: e.env})
	require.NoError(e.t, err)
	return rep
}

func (e *bareEnv) kubectl(args ...string) string {
	e.t.Helper()
	out, err := cluster.Kubectl(context.Background(), append([]string{"-n", e.ns}, args...)...).CombinedOutput()
	require.NoError(e.t, err, "kubectl %v: %s", args, out)
	return string(out)
}

// waitFor polls the live object until cond holds (a controller's write), failing after a minute.
func (e *bareEnv) waitFor(gvr schema.GroupVersionResource, name string, cond func(*unstructured.Unstructured) bool) {
	e.t.Helper()
	dyn, err := cluster.Dynamic()
	require.NoError(e.t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		u, err := dyn.Resource(gvr).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && cond(u) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s %s: the controller did not write what was waited for (err %v): %v", gvr.Resource, name, err, u)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reported is one drifted field as a user reads it.
type reported struct {
	Object, Path, Change string
	Live                 any
}

func fieldsOf(rep *drift.Report) []reported {
	var out []reported
	for _, o := range rep.Objects {
		if len(o.Fields) == 0 {
			out = append(out, reported{Object: o.Kind + "/" + o.Name, Change: o.Status})
		}
		for _, f := range o.Fields {
			out = append(out, reported{o.Kind + "/" + o.Name, f.Path, f.Change, f.Live})
		}
	}
	return out
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

const bareDeployments = `apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: NAMESPACE}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: registry.example.com/api:1.0}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NAMESPACE}
data: {mode: fast}
`

// TestRolloutOfADeploymentWithoutAnnotations: Git declares no annotations, and the real
// Deployment controller writes its revision annotation after the rollout (it then made the
// map). That is no drift with the default rules or a user's rule naming the key; without a rule
// the key is reported alone; a person's key beside it is drift, reported alone.
func TestRolloutOfADeploymentWithoutAnnotations(t *testing.T) {
	testcluster.Need(t)
	e := newBareEnv(t, bareDeployments)
	e.waitFor(deploymentsGVR, "api", func(u *unstructured.Unstructured) bool {
		return u.GetAnnotations()["deployment.kubernetes.io/revision"] == "1"
	})
	rep := e.audit()
	assert.True(t, rep.InSync, "the rollout's annotation is drift:\n%s", dump(rep))

	userRule := func(a *Auditor) {
		a.Options.Controllers = []drift.ControllerRule{{Manager: "kube-controller-manager", Group: "apps", Kinds: []string{"Deployment"},
			Paths: []string{"/metadata/annotations/deployment.kubernetes.io~1revision"}}}
	}
	rep = e.audit(userRule)
	assert.True(t, rep.InSync, "a user's rule on the key does not excuse it:\n%s", dump(rep))

	rep = e.audit(func(a *Auditor) { a.Options.Controllers = nil })
	assert.Equal(t, []reported{{"Deployment/api", ".metadata.annotations", drift.Added, map[string]any{"deployment.kubernetes.io/revision": "1"}}},
		fieldsOf(rep), "without a rule the controller's map is what it added")

	e.kubectl("annotate", "deployment/api", "team=search")
	want := []reported{{"Deployment/api", ".metadata.annotations.team", drift.Added, "search"}}
	for _, opt := range []func(*Auditor){func(*Auditor) {}, userRule} {
		if diff := cmp.Diff(want, fieldsOf(e.audit(opt))); diff != "" {
			t.Errorf("a person's annotation beside the controller's (-want +got):\n%s", diff)
		}
	}
}

// TestBoundClaimWithoutAnnotations: a claim Git declares without annotations, bound by the real
// PV controller to a volume an admin made (static provisioning): its bind annotations and
// volumeName are not drift; a person's annotation on the claim is, alone.
func TestBoundClaimWithoutAnnotations(t *testing.T) {
	testcluster.Need(t)
	e := newBareEnv(t, `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: NAMESPACE}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
`)
	pv := "pv-" + e.ns
	cmd := cluster.Kubectl(context.Background(), "create", "-f", "-")
	cmd.Stdin = strings.NewReader(`apiVersion: v1
kind: PersistentVolume
metadata: {name: ` + pv + `}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: ` + e.ns + `, name: data}
  hostPath: {path: /tmp/` + pv + `}
`)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = cluster.Kubectl(context.Background(), "delete", "pv", pv, "--wait=false").Run() })
	e.waitFor(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "data", func(u *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "Bound" && u.GetAnnotations()["pv.kubernetes.io/bind-completed"] == "yes"
	})
	rep := e.audit()
	assert.True(t, rep.InSync, "the binding is drift:\n%s", dump(rep))

	e.kubectl("annotate", "pvc/data", "owner=bob")
	if diff := cmp.Diff([]reported{{"PersistentVolumeClaim/data", ".metadata.annotations.owner", drift.Added, "bob"}}, fieldsOf(e.audit())); diff != "" {
		t.Errorf("a person's annotation on the bound claim (-want +got):\n%s", diff)
	}
}

// TestBorrowedControllerName: the real HPA (kube-controller-manager) scales "scaled" to its
// minimum, and alice scales "hand" 2 → 7 through the scale subresource under the controller's
// field-manager name. With the API server's audit events the HPA's write is excused (checked
// against its identity) and alice's is drift, named, with the borrowed name; without them both
// pass on the name, and the report says that the rule was taken on the name alone.
func TestBorrowedControllerName(t *testing.T) {
	testcluster.Need(t)
	e := newBareEnv(t, autoscaledDeployment("scaled", 1, 3)+"---\n"+autoscaledDeployment("hand", 2, 2))
	e.waitFor(deploymentsGVR, "scaled", func(u *unstructured.Unstructured) bool {
		r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return r == 3
	})
	out, err := cluster.Kubectl(context.Background(), "--context", "alice", "-n", e.ns, "patch", "deployment/hand", "--subresource=scale",
		"--field-manager=kube-controller-manager", "--type=merge", `-p={"spec":{"replicas":7}}`).CombinedOutput()
	require.NoError(t, err, "%s", out)

	bin := buildAuditor(t)
	diff := func(args ...string) drift.Report {
		t.Helper()
		// The audit log is written as requests complete; the CLI reads what is there.
		out, code := runAuditorStdout(t, bin, append([]string{"diff", "--env", e.env, "--repo", e.dir, "--kubeconfig", cluster.Kubeconfig, "-o", "json"}, args...)...)
		require.Contains(t, []int{0, 1}, code, out)
		var rep drift.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		return rep
	}
	var rep drift.Report
	deadline := time.Now().Add(30 * time.Second)
	for rep = diff("--audit-log", cluster.AuditLog); len(rep.Objects) == 0 && time.Now().Before(deadline); rep = diff("--audit-log", cluster.AuditLog) {
		time.Sleep(time.Second) // alice's event not in the log yet
	}
	require.Len(t, rep.Objects, 1, "%s", dump(&rep))
	f := field(t, &rep, object(t, &rep, "Deployment", "hand"), ".spec.replicas")
	assert.Equal(t, []any{int64(2), int64(7), "kube-controller-manager", "kube-controller-manager"}, []any{toInt(f.Desired), toInt(f.Live), f.Manager, f.Borrowed})
	require.NotNil(t, f.Actor)
	assert.Equal(t, "alice", f.Actor.User)
	var kcm drift.Excusal
	for _, x := range rep.Excused {
		if x.Manager == "kube-controller-manager" {
			kcm = x
		}
	}
	// The HPA's scale of "scaled", checked against kube-controller-manager's identity, and the
	// Deployment controller's revision annotation on both, which it writes through the status
	// subresource: the platform's audit policy does not log status writes, so those pass on the
	// name alone, and the report says so.
	assert.Equal(t, drift.Excusal{Manager: "kube-controller-manager", Fields: 3, Verified: 1}, kcm, "%s", dump(&rep))
	require.Len(t, rep.Notes, 1)
	assert.Contains(t, rep.Notes[0], "kube-controller-manager 2")

	plain := diff()
	assert.Empty(t, plain.Objects, "without audit events the name excuses both")
	require.Len(t, plain.Notes, 1)
	assert.Contains(t, plain.Notes[0], "on the field-manager name alone")
	assert.Contains(t, plain.Notes[0], "kube-controller-manager 4", "alice's write counted with the controller's three")
}

// autoscaledDeployment is a Deployment of replicas in Git and an HPA of minReplicas over it.
func autoscaledDeployment(name string, replicas, minReplicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: NAMESPACE}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: app, image: registry.example.com/app:1.0, resources: {requests: {cpu: 100m}}}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: %[1]s, namespace: NAMESPACE}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: %[1]s}
  minReplicas: %[3]d
  maxReplicas: 10
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}]
`, name, replicas, minReplicas)
}

func toInt(v any) any {
	if f, ok := v.(float64); ok {
		return int64(f)
	}
	return v
}

// TestKubectlScaleOfReplicasGitLeavesOut: Git declares no replicas (the default, 1) and no
// autoscaler targets the Deployment. `kubectl scale --replicas=4` writes through the scale
// subresource to a field nobody owned, and the API server records no owner for it: the value
// alone says it is drift.
func TestKubectlScaleOfReplicasGitLeavesOut(t *testing.T) {
	testcluster.Need(t)
	e := newBareEnv(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: NAMESPACE}
spec:
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers: [{name: worker, image: registry.example.com/worker:1.0}]
`)
	require.True(t, e.audit().InSync)
	e.kubectl("scale", "deployment/worker", "--replicas=4")
	rep := e.audit()
	f := field(t, rep, object(t, rep, "Deployment", "worker"), ".spec.replicas")
	assert.Equal(t, []any{drift.Changed, int64(1), int64(4)}, []any{f.Change, toInt(f.Desired), toInt(f.Live)})
}
