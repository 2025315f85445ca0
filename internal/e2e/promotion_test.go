package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestPinnedProdRunsItsPinAndItsApplicationsPatches: prod's Application is pinned to a commit
// and carries a scheduled scale-up as a kustomize patch (what root-prod applies from apps/prod on
// main). Real Argo CD applies the patch on top of the pin and none of a later commit on main; the
// audit renders the same (the pin, with the synced source's patches) and finds no drift. A render
// without the patch would report the HPA's minReplicas, 3 in Git, 6 live.
func TestPinnedProdRunsItsPinAndItsApplicationsPatches(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	f := platform(t)
	pin := f.Head
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"source": map[string]any{
		"targetRevision": pin,
		"kustomize": map[string]any{"patches": []any{map[string]any{
			"target": map[string]any{"kind": "HorizontalPodAutoscaler", "name": "rag-api"},
			"patch":  `[{"op":"replace","path":"/spec/minReplicas","value":6}]`,
		}}},
	}}})
	require.NoError(t, err)
	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	_, err = dyn.Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).Patch(ctx, f.App(),
		types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "root-app"})
	require.NoError(t, err)

	// A change on main after the pin: not prod's until a promotion.
	f.Edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.4.3")
	f.Commit("rag-api 1.4.3 on main")
	f.Refresh()

	cs, err := cluster.Clientset()
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers(f.NS("api")).Get(ctx, "rag-api", metav1.GetOptions{})
		return err == nil && hpa.Spec.MinReplicas != nil && *hpa.Spec.MinReplicas == 6, nil
	})
	require.NoError(t, err, "Argo CD applied the Application's patch")
	f.WaitSynced(pin)

	dep, err := cs.AppsV1().Deployments(f.NS("api")).Get(ctx, "rag-api", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Image, ":1.4.2", "main's commit reached the pinned env")

	rep := auditEnv(t, f)
	assert.True(t, rep.InSync, "the patch Argo CD applied is what Git says:\n%s", dump(rep))
	assert.Equal(t, pin, rep.Revision)
	assert.False(t, rep.PendingSync, "a commit on main is not a pending sync of a pinned env:\n%s", dump(rep))
}
