package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// TestPushedCommitIsPendingSyncUntilArgoCDSyncsIt: a commit Argo CD has seen but not synced
// (automated sync off) is pendingSync, not drift — the audit compares the cluster with the
// revision Argo CD last synced, which its status.history records — and once Argo CD syncs it,
// the env is in sync at the new revision.
func TestPushedCommitIsPendingSyncUntilArgoCDSyncsIt(t *testing.T) {
	testcluster.Need(t)
	f := platformWith(t, testfixture.Options{ManualSync: true})
	synced := f.Head
	f.Edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.4.3") // the promotion of rag-api 1.4.3 to prod
	head := f.Commit("rag-api 1.4.3")
	f.Refresh()
	app := f.Application()
	compared, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
	status, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
	require.Equal(t, head, compared, "Argo CD compared the new head")
	require.Equal(t, "OutOfSync", status, "Argo CD's status while the commit waits")

	rep := auditEnv(t, f)
	assert.True(t, rep.PendingSync, "pendingSync:\n%s", dump(rep))
	assert.True(t, rep.InSync, "a commit waiting for its sync is not drift:\n%s", dump(rep))
	assert.Equal(t, synced, rep.Revision, "the audit compares with the synced revision")
	assert.Equal(t, head, rep.HeadRevision)

	f.ArgoSync(head)
	rep = auditEnv(t, f)
	assert.False(t, rep.PendingSync, "after the sync:\n%s", dump(rep))
	assert.True(t, rep.InSync, "after the sync:\n%s", dump(rep))
	assert.Equal(t, head, rep.Revision)
}
