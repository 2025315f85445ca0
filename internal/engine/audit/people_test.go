package audit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestAuditLogNamesThePeople: alice edits qdrant's replicas with `kubectl edit`, bob removes a
// Git-declared env var with `kubectl set env X-` (a removal leaves no managedFields entry), both
// with their own tokens against the real API server, which writes its audit log with the
// platform's policy (clusters/audit-policy.yaml). `auditor diff --audit-log` names each of them
// on their field; without the log, nobody is named.
func TestAuditLogNamesThePeople(t *testing.T) {
	testcluster.Need(t)
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

	out, code := runAuditorStdout(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig,
		"--audit-log", cluster.AuditLog, "-o", "json")
	require.Equal(t, 1, code, out)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)

	replicas := field(t, &rep, object(t, &rep, "StatefulSet", "qdrant"), ".spec.replicas")
	require.NotNil(t, replicas.Actor, "no person on qdrant's replicas:\n%s", dump(&rep))
	assert.Equal(t, "alice", replicas.Actor.User)
	assert.Equal(t, []string{"platform-oncall", "system:authenticated"}, replicas.Actor.Groups)
	assert.Equal(t, "kubectl-edit", replicas.Manager)
	// Her write's changes set the live value (the StatefulSet controller's status writes moved the
	// resourceVersion since), even when she edits within the second the sync made the object in.
	assert.Equal(t, "changes", replicas.Actor.Match)
	assert.NotEmpty(t, replicas.Actor.SourceIPs)
	assert.Contains(t, replicas.Actor.UserAgent, "kubectl")

	env := field(t, &rep, object(t, &rep, "Deployment", "rag-api"), ".spec.template.spec.containers[name=api].env[name=QDRANT_URL]")
	assert.Equal(t, drift.Removed, env.Change)
	assert.Empty(t, env.Manager, "a removal has no managedFields entry")
	require.NotNil(t, env.Actor, "no person on the removed env var:\n%s", dump(&rep))
	assert.Equal(t, "bob", env.Actor.User)
	assert.Equal(t, "patch", env.Actor.Verb)

	// Without the audit log the report is as before: managers, no people.
	out, code = runAuditorStdout(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "-o", "json")
	require.Equal(t, 1, code, out)
	var plain drift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &plain), out)
	assert.Nil(t, field(t, &plain, object(t, &plain, "StatefulSet", "qdrant"), ".spec.replicas").Actor)

	// The text output says it too.
	out, _ = runAuditor(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--audit-log", cluster.AuditLog)
	assert.Contains(t, out, "by alice with kubectl-edit")
	assert.Contains(t, out, "by bob (patch")
}

// kubectlEditAs runs `kubectl edit` as a person (their context), with an editor applying a sed
// expression.
func kubectlEditAs(t *testing.T, person, ns, obj, sedExpr string) {
	t.Helper()
	editor := filepath.Join(t.TempDir(), "editor.sh")
	require.NoError(t, os.WriteFile(editor, []byte("#!/bin/sh\nsed -i '"+sedExpr+"' \"$1\"\n"), 0o755))
	edit := cluster.Kubectl(context.Background(), "--context", person, "-n", ns, "edit", obj)
	edit.Env = append(edit.Env, "EDITOR="+editor)
	out, err := edit.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "edited")
}

// TestAuditLogTellsTwoPeopleOnOneObjectApart: alice and bob both use kubectl on one object, each
// changing a field of their own; the later write (and the field manager's managedFields time,
// which moved with it) is not taken for the earlier one's field. On qdrant, alice edits the
// replicas, then bob the image, both with `kubectl edit`. On rag-api, bob removes a Git-declared
// env var with `kubectl set env X-`, then alice edits the image: the removal is bob's, although
// alice's write is the person's write that made the live object. Each field is matched by what
// the writes changed.
func TestAuditLogTellsTwoPeopleOnOneObjectApart(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	rag, api := f.NS("rag"), f.NS("api")
	kubectlEditAs(t, "alice", rag, "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	kubectlEditAs(t, "bob", rag, "statefulset/qdrant", `s#image: qdrant/qdrant:v1.15.4#image: qdrant/qdrant:v1.15.5#`)
	out, err := cluster.Kubectl(context.Background(), "--context", "bob", "-n", api, "set", "env", "deployment/rag-api", "-c", "api", "QDRANT_URL-").CombinedOutput()
	require.NoError(t, err, "%s", out)
	kubectlEditAs(t, "alice", api, "deployment/rag-api", `s#image: registry.example.com/llm/rag-api:1.4.2#image: registry.example.com/llm/rag-api:1.4.3#`)

	report, code := runAuditorStdout(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig,
		"--audit-log", cluster.AuditLog, "-o", "json")
	require.Equal(t, 1, code, report)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(report), &rep), report)
	qdrant, ragAPI := object(t, &rep, "StatefulSet", "qdrant"), object(t, &rep, "Deployment", "rag-api")
	cases := []struct {
		obj        drift.Object
		path, user string
	}{
		{qdrant, ".spec.replicas", "alice"},
		{qdrant, ".spec.template.spec.containers[name=qdrant].image", "bob"},
		{ragAPI, ".spec.template.spec.containers[name=api].env[name=QDRANT_URL]", "bob"},
		{ragAPI, ".spec.template.spec.containers[name=api].image", "alice"},
	}
	for _, tc := range cases {
		t.Run(tc.obj.Name+" "+tc.path, func(t *testing.T) {
			fl := field(t, &rep, tc.obj, tc.path)
			require.NotNil(t, fl.Actor, "no person:\n%s", dump(&rep))
			assert.Equal(t, []string{tc.user, "changes"}, []string{fl.Actor.User, fl.Actor.Match}, "%+v", fl.Actor)
		})
	}
	assert.Equal(t, "kubectl-edit", field(t, &rep, qdrant, ".spec.replicas").Manager, "one manager for both people")
}

// TestAuditLogNamesWhoMadeAndDeletedObjects: alice creates a ConfigMap Git does not declare with
// `kubectl create configmap` (Extra), bob deletes one Git declares with `kubectl delete`
// (Missing); `auditor diff --audit-log` names them on the objects, in JSON and text.
func TestAuditLogNamesWhoMadeAndDeletedObjects(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	var declared *drift.Object
	for _, o := range f.Rendered(f.Head).Objects {
		if o.GetKind() == "ConfigMap" && o.GetNamespace() != "" {
			declared = &drift.Object{Namespace: o.GetNamespace(), Name: o.GetName()}
			break
		}
	}
	require.NotNil(t, declared, "prod declares no ConfigMap")
	api := f.NS("api")
	out, err := cluster.Kubectl(context.Background(), "--context", "alice", "-n", api, "create", "configmap", "hotfix", "--from-literal=k=v").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = cluster.Kubectl(context.Background(), "--context", "bob", "-n", declared.Namespace, "delete", "configmap", declared.Name).CombinedOutput()
	require.NoError(t, err, "%s", out)

	report, code := runAuditorStdout(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig,
		"--audit-log", cluster.AuditLog, "-o", "json")
	require.Equal(t, 1, code, report)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(report), &rep), report)
	extra := object(t, &rep, "ConfigMap", "hotfix")
	assert.Equal(t, drift.Extra, extra.Status)
	require.NotNil(t, extra.Actor, "no person on the Extra ConfigMap:\n%s", dump(&rep))
	assert.Equal(t, []string{"alice", "create", "created"}, []string{extra.Actor.User, extra.Actor.Verb, extra.Actor.Match})
	require.NotNil(t, extra.Creator)
	assert.Equal(t, "kubectl-create", extra.Creator.Manager)
	missing := object(t, &rep, "ConfigMap", declared.Name)
	assert.Equal(t, drift.Missing, missing.Status)
	require.NotNil(t, missing.Actor, "no person on the Missing ConfigMap:\n%s", dump(&rep))
	assert.Equal(t, []string{"bob", "delete", "deleted"}, []string{missing.Actor.User, missing.Actor.Verb, missing.Actor.Match})

	text, _ := runAuditor(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--audit-log", cluster.AuditLog)
	assert.Contains(t, text, "ConfigMap "+api+"/hotfix: in the cluster, not in Git — created by alice with kubectl-create")
	assert.Contains(t, text, "ConfigMap "+declared.Namespace+"/"+declared.Name+": in Git, not in the cluster — deleted by bob (delete ")
}

// TestHandEditOfAPoolSelectorNamesThePerson: alice points InferencePool qwen at pods of another
// name with `kubectl edit`. The pool is drift like any object, on its selector, and the audit log
// names her.
func TestHandEditOfAPoolSelectorNamesThePerson(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	kubectlEditAs(t, "alice", f.NS("inference"), "inferencepool/qwen", `s/app.kubernetes.io\/name: vllm-qwen$/app.kubernetes.io\/name: vllm-qwen-old/`)

	out, code := runAuditorStdout(t, buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig,
		"--audit-log", cluster.AuditLog, "-o", "json")
	require.Equal(t, 1, code, out)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	pool := object(t, &rep, "InferencePool", "qwen")
	require.Len(t, pool.Fields, 1, "only the selector drifted:\n%s", dump(&rep))
	sel := pool.Fields[0]
	assert.Contains(t, sel.Path, ".spec.selector.matchLabels")
	assert.Equal(t, drift.Changed, sel.Change)
	assert.Equal(t, "vllm-qwen-old", sel.Live)
	assert.Equal(t, "vllm-qwen", sel.Desired)
	require.NotNil(t, sel.Actor, "no person on the pool's selector:\n%s", dump(&rep))
	assert.Equal(t, "alice", sel.Actor.User)
	assert.Equal(t, "kubectl-edit", sel.Manager)
}
