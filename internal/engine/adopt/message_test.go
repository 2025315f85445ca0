package adopt_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// TestAdoptPatchOneDriftAtATime applies the patch of each drift message in turn, each written
// against the revision the previous one committed: the second finds the adopt file there and
// modifies it, the image moves the file from patches: to transformers:.
func TestAdoptPatchOneDriftAtATime(t *testing.T) {
	files := map[string]string{"overlays/dev/kustomization.yaml": adopt.DevKust, "overlays/dev/capacity.yaml": adopt.Capacity}
	for k, v := range adopt.APIBase {
		files[k] = v
	}
	dir := adopt.GitRepo(t, files)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	opts := notify.Options{ReadFile: repo.ReadFile}
	obj := notifytest.Deployment(adopt.AReplicas, adopt.ANoFoo, adopt.AImage, adopt.ATeam)
	for i, f := range obj.Fields {
		head := adopt.Git(t, dir, "rev-parse", "HEAD")
		one := obj
		one.Fields = []drift.Field{f}
		msg := notify.DriftMessage(notify.Items(notifytest.Report("dev", head, one))[0], opts)
		line := msg.Lines[len(msg.Lines)-1]
		require.Equal(t, "Adopt into Git", line.Label, "%s", msg.PlainText())
		require.True(t, line.Code, "%s", msg.PlainText())
		adopt.ApplyPatch(t, dir, line.Text)
		adopt.Git(t, dir, "commit", "-qm", "adopt "+f.Path)
		for _, done := range obj.Fields[:i+1] {
			adopt.AssertAdopted(t, dir, "dev", notifytest.Deployment(done), &adopt.Adoption{Diff: line.Text})
		}
	}
	kust, err := os.ReadFile(filepath.Join(dir, "overlays/dev/kustomization.yaml"))
	require.NoError(t, err)
	assert.NotContains(t, string(kust), "- path: adopt-deployment-api.yaml", "moved to transformers:")
}

// TestAdoptLineNothingExpressible: a drift no patch can express is explained in the message.
func TestAdoptLineNothingExpressible(t *testing.T) {
	msg := notify.DriftMessage(notify.Items(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(adopt.ATolByIx)))[0], notify.Options{ReadFile: func(_, name string) ([]byte, error) {
		if name != "overlays/dev/kustomization.yaml" {
			return nil, fs.ErrNotExist
		}
		return []byte(adopt.DevKust), nil
	}})
	assert.Contains(t, msg.PlainText(), "Adopt into Git: no patch: .spec.template.spec.tolerations[0]: not expressible")
}

// TestAdoptLineWithoutFiles: without the overlay's files no patch is offered as one.
func TestAdoptLineWithoutFiles(t *testing.T) {
	it := notify.Items(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(adopt.AReplicas)))[0]
	tests := []struct {
		name string
		opts notify.Options
		want string
	}{
		{"no reader", notify.Options{}, "Adopt into Git (overlay not read): no patch: this auditor does not read the repository's files"},
		{"reader fails", notify.Options{ReadFile: func(string, string) ([]byte, error) { return nil, os.ErrPermission }},
			"Adopt into Git (overlay not read): no patch: read overlays/dev/kustomization.yaml: permission denied"},
		{"no kustomization", notify.Options{ReadFile: func(string, string) ([]byte, error) { return nil, os.ErrNotExist }},
			"Adopt into Git: no patch: overlays/dev: no kustomization.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := notify.DriftMessage(it, tt.opts)
			line := msg.Lines[len(msg.Lines)-1]
			assert.False(t, line.Code)
			assert.Contains(t, msg.PlainText(), tt.want)
		})
	}
}
