// Package e2e runs the platform through real Argo CD on nodes that run pods: kube-apiserver,
// etcd, the scheduler and controller-manager, kwok, and Argo CD's application controller and
// repo-server, all built from their Go modules (`make tools`). Argo CD syncs each test's copy of
// the platform from a Git repository of its own; hand edits are made with the real kubectl; the
// auditor's verdicts are checked against Argo CD's own status.
package e2e

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/simulate"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	render.ServeWorkerIfChild() // the daemon renders in a child process of this test binary
	os.Exit(testcluster.Main(m, testcluster.Options{Scheduler: true, ControllerManager: true, Kwok: true, ArgoCD: true}, &cluster))
}

var nodesOnce sync.Once

// platform gives the test its own copy of prod, synced by Argo CD onto kwok nodes modelled on
// prod's NodePools (added once per package), with selfHeal off so hand edits stay.
func platform(t *testing.T) *testfixture.Platform {
	t.Helper()
	return platformWith(t, testfixture.Options{})
}

// platformWith is platform with the fixture's options.
func platformWith(t *testing.T, opts testfixture.Options) *testfixture.Platform {
	t.Helper()
	nodesOnce.Do(func() {
		src, err := render.FromDir("../..")
		require.NoError(t, err)
		res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		require.NoError(t, cluster.AddNodes(ctx, simulate.Nodes(simulate.GroupsFromNodePools(res.Objects))))
	})
	return testfixture.NewWith(t, cluster, "../..", opts)
}
