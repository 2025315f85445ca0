package render

import (
	"context"
	"os"
	"testing"

	"github.com/llm-gitops/platform/internal/testcluster"
)

var cluster *testcluster.Cluster

// TestMain starts the API server with kube-controller-manager: Pod admission needs what it makes
// (each namespace's default ServiceAccount, the ResourceQuotas' status) before Pod Security gets
// its say (podsecurity_test.go).
func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{ControllerManager: true}, &cluster))
}

// TestOverlaysAcceptedByAPIServer server-side applies every rendered object of every overlay as
// Argo CD would, first as a dry-run (nothing persisted), then for real, against the real API
// server with the upstream CRDs: schemas, defaults and CEL rules all get their say.
func TestOverlaysAcceptedByAPIServer(t *testing.T) {
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
