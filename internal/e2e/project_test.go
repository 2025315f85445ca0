package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// TestProjectRefusesAKindItDoesNotAllow: the env syncs in Git's AppProject (apps/prod/project.yaml,
// names prefixed), and real Argo CD refuses a cluster-scoped kind the project does not whitelist
// — a StorageClass added to overlays/prod — naming it, and never creates it: a new kind cannot
// reach the cluster without its project (internal/engine/render/projects_test.go keeps the two equal).
func TestProjectRefusesAKindItDoesNotAllow(t *testing.T) {
	testcluster.Need(t)
	// Synced once by hand, then one sync operation without retries: an automated sync would
	// retry the refused revision and hold the Application's deletion at the end of the test.
	f := platformWith(t, testfixture.Options{ManualSync: true})
	app := f.Application()
	project, _, _ := unstructured.NestedString(app.Object, "spec", "project")
	require.Equal(t, f.Prefix+"-llm-prod", project, "the env's Application syncs in its own project")

	sc := f.Prefix + "-not-allowed"
	require.NoError(t, f.Write("overlays/prod/not-allowed.yaml", `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: `+sc+`
provisioner: example.com/none
`))
	f.Edit("overlays/prod/kustomization.yaml", "resources:\n", "resources:\n  - not-allowed.yaml\n")
	head := f.Commit("a StorageClass the project does not allow")
	syncOnce(t, f.App(), head)

	const want = "resource storage.k8s.io:StorageClass is not permitted in project " // controller/sync.go
	var status string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		app := f.Application()
		op, _, _ := unstructured.NestedMap(app.Object, "status", "operationState")
		data, _ := json.Marshal(op)
		status = string(data)
		return strings.Contains(status, head) && strings.Contains(status, want), nil
	})
	require.NoError(t, err, "Argo CD never refused the StorageClass at %.8s; operationState: %s", head, status)
	assert.Contains(t, status, want+project)

	cs, err := cluster.Clientset()
	require.NoError(t, err)
	_, err = cs.StorageV1().StorageClasses().Get(context.Background(), sc, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "StorageClass %s must not exist: %v", sc, err)
}

// syncOnce starts one sync operation of rev (as `argocd app sync --revision` without --retry-limit)
// and returns without waiting for it.
func syncOnce(t *testing.T, app, rev string) {
	t.Helper()
	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	patch, err := json.Marshal(map[string]any{"operation": map[string]any{
		"initiatedBy": map[string]any{"username": "e2e"},
		"sync":        map[string]any{"revision": rev, "syncOptions": []string{"ServerSideApply=true"}},
	}})
	require.NoError(t, err)
	_, err = dyn.Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).Patch(context.Background(), app,
		types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "e2e"})
	require.NoError(t, err)
}
