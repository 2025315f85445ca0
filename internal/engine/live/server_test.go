package live

import (
	"context"
	"testing"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/cache"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/tracing"
	"github.com/argoproj/argo-cd/v3/util/argo"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestServerIsWhatArgoCDsControllerSends: the server version and API versions the auditor sends
// the repo-server are exactly those Argo CD's application controller computes for the same
// cluster, with Argo CD's own code (the cluster cache's discovery and APIResourcesToStrings).
// The repo-server keys its manifest cache on both, so any difference makes every audit a
// cache miss and a fresh render.
func TestServerIsWhatArgoCDsControllerSends(t *testing.T) {
	testcluster.Need(t)
	c, err := New(context.Background(), cluster.Config)
	require.NoError(t, err)
	got, err := c.Server()
	require.NoError(t, err)

	kubectl := &kube.KubectlCmd{Log: logr.Discard(), Tracer: tracing.NopTracer{}}
	version, err := kubectl.GetServerVersion(cluster.Config)
	require.NoError(t, err)
	resources, err := kubectl.GetAPIResources(cluster.Config, false, cache.NewNoopSettings())
	require.NoError(t, err)
	want := Server{Version: version, APIVersions: argo.APIResourcesToStrings(resources, true)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Server() differs from what Argo CD's controller sends (-controller +auditor):\n%s", diff)
	}
}
