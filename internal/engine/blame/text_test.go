package blame

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestWriteTextGolden: the table per field (Git value, commit, author, date, subject; the drift
// under it), then the writes with old → new, then the notes.
func TestWriteTextGolden(t *testing.T) {
	day := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	seed := &Commit{SHA: "69518b64c82400000000000000000000000000aa", Author: "dev", Date: day, Subject: "platform: vLLM qwen"}
	image := &Commit{SHA: "3c4d5e6f7a8b00000000000000000000000000bb", Author: "Ana Lyst", Date: day.Add(24 * time.Hour), Subject: "prod: vLLM v0.11.0"}
	old := &Commit{SHA: "9f8e7d6c5b4a00000000000000000000000000cc", Author: "dev", Date: day.Add(-240 * time.Hour), Subject: "base: vllm", Boundary: true}
	b := &Blame{Env: "prod", Revision: "1a2b3c4d5e6f7a8b9c0d00000000000000000000",
		Object:  Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm-inference", Name: "vllm-qwen"},
		History: History{Commits: 200, Oldest: old.SHA, Complete: false, Skipped: []Skipped{{Commit: "5555555555550000000000000000000000000000", Error: "render prod: boom"}}},
		Fields: []Field{
			{Path: ".metadata.name", Git: "vllm-qwen", Commit: old},
			{Path: ".spec.replicas", Git: int64(2), Commit: seed, Drift: []drift.Field{{Path: ".spec.replicas", Desired: int64(2), Live: int64(5), Change: drift.Changed,
				Writer: drift.Writer{Manager: "kubectl-edit", Operation: "Update", Time: "2026-11-30T09:14:00Z"},
				Actor:  &drift.Actor{User: "alice", Verb: "patch", Time: "2026-11-30T09:14:00Z", Match: "fieldManager"}}}},
			{Path: ".spec.template.spec.containers[name=vllm].args", Git: []any{"--port=8000", "--max-num-seqs=15"}, Commit: seed,
				Drift: []drift.Field{{Path: ".spec.template.spec.containers[name=vllm].args[1]", Desired: "--max-num-seqs=15", Live: "--max-num-seqs=30", Change: drift.Changed,
					Writer: drift.Writer{Manager: "argocd-controller", Operation: "Apply", Time: "2026-11-30T09:20:00Z"}}}},
			{Path: ".spec.template.spec.containers[name=vllm].image", Git: "vllm/vllm-openai:v0.11.0", Commit: image},
			{Path: ".metadata.labels.team", Drift: []drift.Field{{Path: ".metadata.labels.team", Live: "search", Change: drift.Added,
				Writer: drift.Writer{Manager: "kubectl-label", Operation: "Update", Time: "2026-11-30T09:30:00Z"},
				Actor:  &drift.Actor{User: "bob", ImpersonatedUser: "ops", Verb: "patch", Time: "2026-11-30T09:30:00Z"}}}},
		},
		Live: &Live{Found: true, UID: "u1", ResourceVersion: "42", Status: drift.Modified, AuditedRevision: "1a2b3c4d5e6f7a8b9c0d00000000000000000000", AuditEvents: true},
		Writes: []Write{
			{User: "bob", ImpersonatedUser: "ops", Tool: "kubectl-label", Verb: "patch", Time: "2026-11-30T09:30:00Z", ChangesFrom: "responses",
				Changes: []Change{{Path: ".metadata.labels.team", New: "search", Change: drift.Added}}},
			{User: "alice", Tool: "kubectl-edit", Verb: "patch", Time: "2026-11-30T09:14:00Z", ChangesFrom: "responses",
				Changes: []Change{{Path: ".spec.replicas", Old: int64(2), New: int64(5), Change: drift.Changed},
					{Path: `.metadata.annotations["kubernetes.io/change-cause"]`, Old: "a", Change: drift.Removed}}},
			{User: "carol", Tool: "kubectl", Subresource: "scale", Verb: "patch", Time: "2026-11-30T09:10:00Z", ChangesFrom: "request",
				Changes: []Change{{Path: ".spec.replicas", New: int64(2), Change: "set"}}},
			{User: "system:serviceaccount:kube-system:deployment-controller", Tool: "kube-controller-manager", Verb: "update", Time: "2026-11-30T09:05:00Z", ChangesFrom: "responses", Changes: []Change{}},
			{User: "system:serviceaccount:argocd:argocd-application-controller", Tool: "argocd-controller", Verb: "create", Time: "2026-11-30T09:00:00Z", ChangesFrom: "created", Changes: []Change{}},
			{User: "dave", Tool: "kubectl", Verb: "delete", Time: "2026-11-30T08:00:00Z", Changes: []Change{}},
		},
		Notes: []string{"env prod did not render at 555555555555 (skipped; a change across it is given to the newer commit): render prod: boom"},
	}
	var buf bytes.Buffer
	require.NoError(t, WriteText(&buf, b))
	golden := filepath.Join("testdata", "blame.golden.txt")
	if *update {
		require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	if d := cmp.Diff(string(want), buf.String()); d != "" {
		t.Errorf("text output (-want +got; go test -run TestWriteTextGolden -update rewrites it):\n%s", d)
	}
}

// TestChangeLinesSayWhenTruncated: a write whose changes the audit events did not keep whole says
// so, after the ones kept or alone.
func TestChangeLinesSayWhenTruncated(t *testing.T) {
	kept := []Change{{Path: `.data["a.txt"]`, Old: "1", New: "2", Change: drift.Changed}}
	cases := []struct {
		name string
		w    Write
		want []string
	}{
		{"all kept", Write{ChangesFrom: "responses", Changes: kept}, []string{`.data["a.txt"]: 1 → 2`}},
		{"some kept", Write{ChangesFrom: "responses", Changes: kept, ChangesTruncated: true}, []string{`.data["a.txt"]: 1 → 2`, "(more changes not kept)"}},
		{"none kept", Write{ChangesFrom: "responses", ChangesTruncated: true}, []string{"(changes not kept: memory bound)"}},
		{"none changed", Write{ChangesFrom: "responses"}, []string{"(no field changed)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, changeLines(tc.w))
		})
	}
}
