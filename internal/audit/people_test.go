package audit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/drift"
)

// TestAuditLogNamesThePeople: alice edits qdrant's replicas with `kubectl edit`, bob removes a
// Git-declared env var with `kubectl set env X-` (a removal leaves no managedFields entry), both
// with their own tokens against the real API server, which writes its audit log with the
// platform's policy (clusters/audit-policy.yaml). `auditor diff --audit-log` names each of them
// on their field; without the log, nobody is named.
func TestAuditLogNamesThePeople(t *testing.T) {
	f := newFixture(t)
	rag, api := f.NS("rag"), f.NS("api")
	editor := filepath.Join(t.TempDir(), "editor.sh")
	require.NoError(t, os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/^  replicas: 1$/  replicas: 3/' \"$1\"\n"), 0o755))
	edit := cluster.Kubectl(context.Background(), "--context", "alice", "-n", rag, "edit", "statefulset/qdrant")
	edit.Env = append(edit.Env, "EDITOR="+editor)
	kout, err := edit.CombinedOutput()
	require.NoError(t, err, "%s", kout)
	kout, err = cluster.Kubectl(context.Background(), "--context", "bob", "-n", api, "set", "env", "deployment/rag-api", "-c", "api", "QDRANT_URL-").CombinedOutput()
	require.NoError(t, err, "%s", kout)

	out, code := runAuditor(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig,
		"--audit-log", cluster.AuditLog, "-o", "json")
	require.Equal(t, 1, code, out)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)

	replicas := field(t, &rep, object(t, &rep, "StatefulSet", "qdrant"), ".spec.replicas")
	require.NotNil(t, replicas.Actor, "no person on qdrant's replicas:\n%s", dump(&rep))
	assert.Equal(t, "alice", replicas.Actor.User)
	assert.Equal(t, []string{"platform-oncall", "system:authenticated"}, replicas.Actor.Groups)
	assert.Equal(t, "kubectl-edit", replicas.Manager)
	// The StatefulSet controller's status writes moved the resourceVersion since: matched by the
	// field manager and managedFields' time.
	assert.Contains(t, []string{"resourceVersion", "fieldManager"}, replicas.Actor.Match)
	assert.NotEmpty(t, replicas.Actor.SourceIPs)
	assert.Contains(t, replicas.Actor.UserAgent, "kubectl")

	env := field(t, &rep, object(t, &rep, "Deployment", "rag-api"), ".spec.template.spec.containers[name=api].env[name=QDRANT_URL]")
	assert.Equal(t, drift.Removed, env.Change)
	assert.Empty(t, env.Manager, "a removal has no managedFields entry")
	require.NotNil(t, env.Actor, "no person on the removed env var:\n%s", dump(&rep))
	assert.Equal(t, "bob", env.Actor.User)
	assert.Equal(t, "patch", env.Actor.Verb)

	// Without the audit log the report is as before: managers, no people.
	out, code = runAuditor(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "-o", "json")
	require.Equal(t, 1, code, out)
	var plain drift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &plain), out)
	assert.Nil(t, field(t, &plain, object(t, &plain, "StatefulSet", "qdrant"), ".spec.replicas").Actor)

	// The text output says it too.
	out, _ = runAuditor(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--audit-log", cluster.AuditLog)
	assert.Contains(t, out, "by alice with kubectl-edit")
	assert.Contains(t, out, "by bob (patch")
}
