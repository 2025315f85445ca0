package audit

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestHandMadeObjectsInScopeAreExtra: objects people make by hand that grant access or move
// data, or of kinds the env renders, are Extra whatever field-manager name made them: a Secret
// created under the applier's name, a ClusterRoleBinding to cluster-admin and a GPU NodePool
// (cluster-scoped), an ExternalSecret pulling the backup keys, a ServiceMonitor, a
// PrometheusRule and a Certificate in managed namespaces. Nothing else is (the shared cluster's
// own objects, Kubernetes' bootstrap RBAC and the harness's, other fixtures' objects).
func TestHandMadeObjectsInScopeAreExtra(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	rag, mon := f.NS("rag"), f.NS("monitoring")
	f.Kubectl("-n", rag, "create", "secret", "generic", "backup-keys-copy", "--from-literal=key=s3cr3t", "--field-manager=argocd-controller")
	f.Kubectl("create", "clusterrolebinding", f.Prefix+"-mallory-admin", "--clusterrole=cluster-admin", "--user=mallory")
	t.Cleanup(func() {
		_ = cluster.Kubectl(context.Background(), "delete", "clusterrolebinding", f.Prefix+"-mallory-admin").Run()
	})
	create := func(doc string) {
		t.Helper()
		cmd := cluster.Kubectl(context.Background(), "create", "-f", "-")
		cmd.Stdin = strings.NewReader(doc)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	create(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ` + f.Prefix + `-handmade}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      requirements: [{key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [h100]}]
`)
	t.Cleanup(func() { _ = cluster.Kubectl(context.Background(), "delete", "nodepool", f.Prefix+"-handmade").Run() })
	create(`apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: exfil, namespace: ` + rag + `}
spec:
  secretStoreRef: {kind: ClusterSecretStore, name: vault}
  target: {name: exfil}
  dataFrom: [{extract: {key: llm/backup}}]
`)
	create(`apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: scrape-all, namespace: ` + mon + `}
spec:
  selector: {}
  endpoints: [{port: metrics}]
`)
	create(`apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: silence, namespace: ` + mon + `}
spec:
  groups: [{name: quiet, rules: [{record: "x:y", expr: "vector(1)"}]}]
`)
	create(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: wildcard, namespace: ` + rag + `}
spec:
  secretName: wildcard-tls
  dnsNames: ["*.example.com"]
  issuerRef: {name: letsencrypt, kind: ClusterIssuer}
`)
	rep := f.audit()
	var got []string
	creators := map[string]string{}
	for _, o := range rep.Objects {
		if o.Status == drift.Extra {
			id := o.Kind + "/" + o.Namespace + "/" + o.Name
			got = append(got, id)
			if o.Creator != nil {
				creators[id] = o.Creator.Manager
			}
		}
	}
	slices.Sort(got)
	want := []string{
		"Certificate/" + rag + "/wildcard",
		"ClusterRoleBinding//" + f.Prefix + "-mallory-admin",
		"ExternalSecret/" + rag + "/exfil",
		"NodePool//" + f.Prefix + "-handmade",
		"PrometheusRule/" + mon + "/silence",
		"Secret/" + rag + "/backup-keys-copy",
		"ServiceMonitor/" + mon + "/scrape-all",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Extra objects (-want +got):\n%s", diff)
	}
	assert.Equal(t, "argocd-controller", creators["Secret/"+rag+"/backup-keys-copy"], "the applier's name excuses nothing")
}

// TestManagedFieldsWipeIsReported: one patch clears managedFields ([{}]), puts the API pods on
// the host's network and changes their image. The wipe itself is drift, and hostNetwork, which
// Git does not declare, is still found, by comparing live with Git's object as the server
// defaults it: right after the write (no entry is left), and through a watching audit (as the
// daemon's) after the sync gave the applier its entry back and set the image right.
func TestManagedFieldsWipeIsReported(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	api := f.NS("api")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := f.watchingAuditor(ctx)
	a.AppName = func(string) string { return f.App() }
	rep, err := a.Run(ctx, Request{Env: f.Env})
	require.NoError(t, err)
	require.True(t, rep.InSync, "%s", dump(rep))

	f.Kubectl("-n", api, "patch", "deployment/rag-api",
		`-p={"metadata":{"managedFields":[{}]},"spec":{"template":{"spec":{"hostNetwork":true,"containers":[{"name":"api","image":"registry.example.com/llm/rag-api:6.6.6"}]}}}}`)
	// The Deployment controller takes the new template up (its revision annotation moves on).
	e := &bareEnv{t: t, ns: api}
	e.waitFor(deploymentsGVR, "rag-api", func(u *unstructured.Unstructured) bool {
		return u.GetAnnotations()["deployment.kubernetes.io/revision"] == "2"
	})
	check := func(rep *drift.Report, image bool) {
		t.Helper()
		o := object(t, rep, "Deployment", "rag-api")
		assert.Equal(t, drift.OwnersCleared, field(t, rep, o, ".metadata.managedFields").Live)
		host := field(t, rep, o, ".spec.template.spec.hostNetwork")
		assert.Equal(t, []any{drift.Added, true}, []any{host.Change, host.Live})
		if image {
			img := field(t, rep, o, ".spec.template.spec.containers[name=api].image")
			assert.Equal(t, []any{drift.Changed, "registry.example.com/llm/rag-api:6.6.6"}, []any{img.Change, img.Live})
		}
		for _, x := range rep.Objects {
			if x.Kind != "Deployment" || x.Name != "rag-api" {
				t.Errorf("only rag-api drifted, not %s %s: %+v", x.Kind, x.Name, x.Fields)
			}
		}
	}
	check(f.audit(), true) // a one-shot audit, as auditor diff

	// The sync sets the image back and gives the applier its entry again; hostNetwork, which Git
	// does not declare and nobody owns now, stays.
	f.Sync(f.Head)
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err = a.Run(ctx, Request{Env: f.Env})
		require.NoError(t, err)
		o := object(t, rep, "Deployment", "rag-api")
		if !slices.ContainsFunc(o.Fields, func(f drift.Field) bool { return strings.HasSuffix(f.Path, ".image") }) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the sync never reached the watch:\n%s", dump(rep))
		time.Sleep(200 * time.Millisecond)
	}
	check(rep, false)
}
