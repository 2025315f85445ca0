package render

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var cluster *testcluster.Cluster

// TestMain starts the API server with kube-controller-manager: Pod admission needs what it makes
// (each namespace's default ServiceAccount, the ResourceQuotas' status) before Pod Security gets
// its say (podsecurity_test.go). Only those controllers run: a Deployment controller would create
// the applied workloads' Pods, whose requests fill the namespaces' quotas, and the dry-run Pods of
// podsecurity_test.go would then be refused by quota, not judged by Pod Security.
func TestMain(m *testing.M) {
	serveTestWorker() // worker_test.go: this binary is also the render worker its tests start
	os.Exit(testcluster.Main(m, testcluster.Options{
		ControllerManager: true,
		Controllers:       []string{"serviceaccount-controller", "serviceaccount-token-controller", "resourcequota-controller", "namespace-controller", "garbage-collector-controller", "root-ca-certificate-publisher-controller"},
	}, &cluster))
}

// TestOverlaysAcceptedByAPIServer server-side applies every rendered object of every overlay as
// Argo CD would, first as a dry-run (nothing persisted), then for real, against the real API
// server with the upstream CRDs: schemas, defaults and CEL rules all get their say.
func TestOverlaysAcceptedByAPIServer(t *testing.T) {
	testcluster.Need(t)
	syncer, err := testcluster.NewSyncer(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			res := renderRepo(t, env)
			if len(res.Objects) < 40 {
				t.Fatalf("only %d objects rendered", len(res.Objects))
			}
			// Namespaces must exist for a dry-run of namespaced objects, so the first pass is real.
			if err := syncer.Sync(context.Background(), "llm-"+env, res.Objects, false); err != nil {
				t.Fatalf("%s rejected by the API server: %v", env, err)
			}
			if err := syncer.Sync(context.Background(), "llm-"+env, res.Objects, true); err != nil {
				t.Fatalf("%s dry-run rejected: %v", env, err)
			}
		})
	}
}

// TestUpstreamCRDsValidateSecurityKinds shows the cert-manager and External Secrets CRDs (from
// their Go modules) do validate what the overlays render: a Certificate without an issuer and an
// ExternalSecret naming a store kind that does not exist are refused, server-side dry-run.
func TestUpstreamCRDsValidateSecurityKinds(t *testing.T) {
	testcluster.Need(t)
	assertCRDsRefuse(t, map[string]crdBreak{
		"Certificate":    {[]string{"spec", "issuerRef"}, map[string]any{"kind": "ClusterIssuer"}, "spec.issuerRef.name: Required value"},
		"ExternalSecret": {[]string{"spec", "secretStoreRef", "kind"}, "Vault", `spec.secretStoreRef.kind: Unsupported value: "Vault"`},
	})
}

// crdBreak is a field set to a value its upstream CRD refuses, with what the refusal says.
type crdBreak struct {
	field []string
	value any
	want  string
}

// assertCRDsRefuse applies prod, then each object of a kind breaks names with its field broken
// (server-side dry-run): the API server must refuse it saying want; prod must render every kind.
func assertCRDsRefuse(t *testing.T, breaks map[string]crdBreak) {
	t.Helper()
	syncer, err := testcluster.NewSyncer(cluster.Config)
	require.NoError(t, err)
	res := renderRepo(t, "prod")
	require.NoError(t, syncer.Sync(context.Background(), "llm-prod", res.Objects, false), "prod rejected by the API server")
	seen := map[string]bool{}
	for _, o := range res.Objects {
		b, ok := breaks[o.GetKind()]
		if !ok || seen[o.GetKind()] {
			continue
		}
		seen[o.GetKind()] = true
		bad := o.DeepCopy()
		require.NoError(t, unstructured.SetNestedField(bad.Object, b.value, b.field...))
		err := syncer.Sync(context.Background(), "llm-prod", []*unstructured.Unstructured{bad}, true)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s %s/%s with %v = %v: got %v, want an error with %q", o.GetKind(), o.GetNamespace(), o.GetName(), b.field, b.value, err, b.want)
		}
	}
	assert.Len(t, seen, len(breaks), "prod renders %v", seen)
}
