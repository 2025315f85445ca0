package audit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestBlameNamesTheCommitAndThePerson: a commit moves prod's vLLM image to v0.30.1 and is synced;
// alice then edits the live image with her own token (`kubectl edit`). `auditor blame` on the
// vLLM Deployment names, for the image, the commit that set it in Git, the drift with alice on
// it, and her write among the object's writes with old → new; the sync's write is there too.
// pinnedDigest is the vLLM image digest overlays/prod pins.
const pinnedDigest = "sha256:8a69ffad015f138d7170c4ddc429e230a3bc1c1719f67e14324749df200a4b90"

func TestBlameNamesTheCommitAndThePerson(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	inference := f.NS("inference")
	platform := f.Head
	// From the pinned tag and digest to a tag alone: the rendered image changes from
	// vllm/vllm-openai:v0.30.0@sha256:… to vllm/vllm-openai:v0.30.1.
	f.Edit("overlays/prod/kustomization.yaml", "newTag: v0.30.0", "newTag: v0.30.1")
	f.Edit("overlays/prod/kustomization.yaml", "    digest: "+pinnedDigest+"\n", "")
	imageCommit := f.Commit("prod: vLLM v0.30.1")
	f.Sync(imageCommit)

	editor := filepath.Join(t.TempDir(), "editor.sh")
	require.NoError(t, os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's|vllm/vllm-openai:v0.30.1|vllm/vllm-openai:v0.31.0|' \"$1\"\n"), 0o755))
	edit := cluster.Kubectl(context.Background(), "--context", "alice", "-n", inference, "edit", "deployment/vllm-qwen")
	edit.Env = append(edit.Env, "EDITOR="+editor)
	kout, err := edit.CombinedOutput()
	require.NoError(t, err, "%s", kout)

	out, code := runAuditorStdout(t, buildAuditor(t), "blame", "deployment/vllm-qwen", "--env", "prod", "-n", inference, "--repo", f.Dir,
		"--kubeconfig", cluster.Kubeconfig, "--audit-log", cluster.AuditLog, "-o", "json")
	require.Equal(t, 0, code, out)
	var b blame.Blame
	require.NoError(t, json.Unmarshal([]byte(out), &b), out)
	assert.Equal(t, imageCommit, b.Revision, "no Application of the fixture's name: the branch head")
	assert.Equal(t, blame.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: inference, Name: "vllm-qwen"}, b.Object)

	image := fieldAt(t, &b, ".spec.template.spec.containers[name=vllm].image")
	assert.Equal(t, "vllm/vllm-openai:v0.30.1", image.Git)
	require.NotNil(t, image.Commit)
	assert.Equal(t, imageCommit, image.Commit.SHA)
	assert.Equal(t, "prod: vLLM v0.30.1", image.Commit.Subject)
	assert.Equal(t, "dev", image.Commit.Author)
	require.Len(t, image.Drift, 1, out)
	assert.Equal(t, "vllm/vllm-openai:v0.31.0", image.Drift[0].Live)
	assert.Equal(t, "kubectl-edit", image.Drift[0].Manager)
	require.NotNil(t, image.Drift[0].Actor, out)
	assert.Equal(t, "alice", image.Drift[0].Actor.User)

	name := fieldAt(t, &b, ".metadata.name")
	require.NotNil(t, name.Commit)
	assert.Equal(t, platform, name.Commit.SHA, "the fixture's first commit made the object")
	assert.True(t, b.History.Complete)

	require.NotNil(t, b.Live)
	assert.True(t, b.Live.Found)
	assert.Equal(t, "Modified", b.Live.Status)
	assert.True(t, b.Live.AuditEvents)
	var alice, sync *blame.Write
	for i, w := range b.Writes {
		if w.User == "alice" && alice == nil {
			alice = &b.Writes[i]
		}
		if w.Tool == "argocd-controller" && sync == nil && hasChange(w, ".spec.template.spec.containers[name=vllm].image") {
			sync = &b.Writes[i]
		}
	}
	require.NotNil(t, alice, "alice's write is not among the object's writes:\n%s", out)
	assert.Equal(t, "kubectl-edit", alice.Tool)
	assert.Equal(t, "patch", alice.Verb)
	assert.Equal(t, "responses", alice.ChangesFrom)
	assert.Contains(t, alice.Changes, blame.Change{Path: ".spec.template.spec.containers[name=vllm].image",
		Old: "vllm/vllm-openai:v0.30.1", New: "vllm/vllm-openai:v0.31.0", Change: "changed"})
	require.NotNil(t, sync, "the sync's write of the new image is not among the object's writes:\n%s", out)
	assert.Contains(t, sync.Changes, blame.Change{Path: ".spec.template.spec.containers[name=vllm].image",
		Old: "vllm/vllm-openai:v0.30.0@" + pinnedDigest, New: "vllm/vllm-openai:v0.30.1", Change: "changed"})
	for i := 1; i < len(b.Writes); i++ {
		assert.GreaterOrEqual(t, b.Writes[i-1].Time, b.Writes[i].Time, "newest first")
	}
	assert.GreaterOrEqual(t, alice.Time, sync.Time, "alice wrote after the sync")

	// The text output says it too.
	text, code := runAuditor(t, buildAuditor(t), "blame", "deployment/vllm-qwen", "--env", "prod", "-n", inference, "--repo", f.Dir,
		"--kubeconfig", cluster.Kubeconfig, "--audit-log", cluster.AuditLog)
	require.Equal(t, 0, code, text)
	assert.Contains(t, text, imageCommit[:7])
	assert.Contains(t, text, "prod: vLLM v0.30.1")
	assert.Contains(t, text, "by alice with kubectl-edit")
	assert.Contains(t, text, ".spec.template.spec.containers[name=vllm].image: vllm/vllm-openai:v0.30.1 → vllm/vllm-openai:v0.31.0")
}

func fieldAt(t *testing.T, b *blame.Blame, path string) blame.Field {
	t.Helper()
	for _, f := range b.Fields {
		if f.Path == path {
			return f
		}
	}
	data, _ := json.MarshalIndent(b, "", "  ")
	t.Fatalf("no field %s in:\n%s", path, data)
	return blame.Field{}
}

func hasChange(w blame.Write, path string) bool {
	for _, c := range w.Changes {
		if c.Path == path {
			return true
		}
	}
	return false
}
