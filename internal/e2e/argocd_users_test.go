package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var (
	argoServerOnce sync.Once
	argoServer     *testcluster.ArgoCDServer
	argoServerErr  error
	alicePassword  string
)

// startArgoCDServer runs argocd-server once per package, with the local account alice.
func startArgoCDServer(t *testing.T) *testcluster.ArgoCDServer {
	t.Helper()
	argoServerOnce.Do(func() {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		alicePassword = hex.EncodeToString(b)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		argoServer, argoServerErr = cluster.StartArgoCDServer(ctx, testcluster.ArgoCDAccount{Name: "alice", Password: alicePassword})
	})
	require.NoError(t, argoServerErr)
	return argoServer
}

// argocdCLI runs Argo CD's own CLI (the binary the controller runs) with its config in cfg.
func argocdCLI(t *testing.T, cfg string, args ...string) string {
	t.Helper()
	bins, err := testcluster.FindBinaries()
	require.NoError(t, err)
	cmd := exec.Command(bins.ArgoCD, append([]string{"--config", cfg}, args...)...)
	cmd.Env = append(os.Environ(), "ARGOCD_BINARY_NAME=argocd")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "argocd %s: %s", args[0], out)
	return string(out)
}

// TestArgoCDUserNamedThroughArgoCDServer: argocd-server runs in the cluster as its
// ServiceAccount; alice, a local Argo CD user, logs in with the real CLI, patches qdrant's
// replicas through `argocd app patch-resource` and deletes its PodDisruptionBudget through
// `argocd app delete-resource`. The daemon (reading the API server's audit log and
// argocd-server's Events) names alice, from Argo CD's record, with the ServiceAccount as who
// wrote. Bob's own kubectl edit in the same test stays bob's, named by the audit log.
func TestArgoCDUserNamedThroughArgoCDServer(t *testing.T) {
	testcluster.Need(t)
	srv := startArgoCDServer(t)
	f := platform(t)
	c := newChat(t)
	d := startDaemon(t, f, c, "auditEvents: {file: "+cluster.AuditLog+"}")
	rag, api := f.NS("rag"), f.NS("api")

	cfg := filepath.Join(t.TempDir(), "argocd-config")
	argocdCLI(t, cfg, "login", srv.Addr, "--plaintext", "--username", "alice", "--password", alicePassword)
	argocdCLI(t, cfg, "app", "patch-resource", f.App(), "--kind", "StatefulSet", "--group", "apps", "--resource-name", "qdrant",
		"--namespace", rag, "--patch", `{"spec":{"replicas":3}}`, "--patch-type", "application/merge-patch+json")
	argocdCLI(t, cfg, "app", "delete-resource", f.App(), "--kind", "PodDisruptionBudget", "--group", "policy", "--resource-name", "qdrant",
		"--namespace", rag)
	kubectl(t, "--context", "bob", "-n", api, "set", "env", "deployment/rag-api", "-c", "api", "QDRANT_URL-")

	const replicas, env = ".spec.replicas", ".spec.template.spec.containers[name=api].env[name=QDRANT_URL]"
	var rep drift.Report
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		rep = driftReport(t, d.Addr())
		pdb := objectActor(&rep, "PodDisruptionBudget", "qdrant")
		return actor(&rep, "qdrant", replicas) == "alice" && actor(&rep, "rag-api", env) == "bob" && pdb != nil && pdb.User == "alice", nil
	})
	require.NoError(t, err, "drift never named alice and bob: %v; the PDB deleted by %+v", fieldsOf(&rep), objectActor(&rep, "PodDisruptionBudget", "qdrant"))
	deleted := objectActor(&rep, "PodDisruptionBudget", "qdrant")
	assert.Equal(t, "alice from Argo CD via "+srv.User, deleted.User+" from "+deleted.From+" via "+deleted.Via, "the deletion through Argo CD")
	assert.Equal(t, "delete", deleted.Verb)
	alice, bob := fieldActor(&rep, "qdrant", replicas), fieldActor(&rep, "rag-api", env)
	assert.Equal(t, "Argo CD", alice.From, "alice named by Argo CD's record")
	assert.Equal(t, srv.User, alice.Via, "argocd-server's ServiceAccount wrote")
	assert.Equal(t, "patch", alice.Verb)
	assert.Equal(t, "audit log", bob.From, "bob's own edit named by the audit log")
	assert.Empty(t, bob.Via)

	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(strings.Join(c.messages(), "\n"), "named by Argo CD's record"), nil
	})
	require.NoError(t, err, "chat never named alice from Argo CD's record: %v", c.messages())
	var said string
	for _, m := range c.messages() {
		if strings.Contains(m, "named by Argo CD's record") {
			said = m
		}
	}
	// auditor diff reads no audit log here: the people come from the daemon (--daemon).
	bin := auditorBinary(t)
	args := []string{"diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--cache-dir", "off", "-o", "json"}
	alone, code := auditorJSON(t, bin, args...)
	require.Equal(t, 1, code)
	assert.Nil(t, fieldActor(alone, "qdrant", replicas), "without a source, nobody")
	assert.Nil(t, fieldActor(alone, "rag-api", env), "without a source, nobody")
	cli, code := auditorJSON(t, bin, append(args, "--daemon", "http://"+d.Addr())...)
	require.Equal(t, 1, code)
	assert.Equal(t, person(alice), person(fieldActor(cli, "qdrant", replicas)), "auditor diff names alice as the daemon does")
	assert.Equal(t, person(bob), person(fieldActor(cli, "rag-api", env)), "auditor diff names bob as the daemon does")
	// With the audit log, auditor diff reads Argo CD's records itself.
	logged, code := auditorJSON(t, bin, append(args, "--audit-log", cluster.AuditLog)...)
	require.Equal(t, 1, code)
	assert.Equal(t, person(alice), person(fieldActor(logged, "qdrant", replicas)), "auditor diff --audit-log names alice from Argo CD's record")
	assert.Equal(t, "bob", actor(logged, "rag-api", env))

	t.Logf("report: alice %+v; bob %+v", *alice, *bob)
	t.Logf("chat: %s", said)
	// The deletion, alone ("Deleted by: alice …") or in a digest ("missing (deleted by alice)").
	deletedBy := regexp.MustCompile(`PodDisruptionBudget [^ ]+/qdrant: missing \(deleted by alice\) \(named by Argo CD's record|\*Deleted by:\* alice \(delete at [^)]*\) \(named by Argo CD's record`)
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return deletedBy.MatchString(strings.Join(c.messages(), "\n")), nil
	})
	require.NoError(t, err, "chat never named alice on the deletion: %v", c.messages())
	assert.Contains(t, said, "alice")
	assert.Contains(t, said, "written by "+srv.User)
}

// driftReport is the report GET /api/v1/drift serves (the API is open).
func driftReport(t *testing.T, addr string) drift.Report {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/drift?env=prod")
	require.NoError(t, err)
	defer resp.Body.Close()
	var rep drift.Report
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	return rep
}

// fieldActor is the actor the report names on an object's field (nil: none).
func fieldActor(rep *drift.Report, name, path string) *drift.Actor {
	for _, o := range rep.Objects {
		for _, fd := range o.Fields {
			if o.Name == name && fd.Path == path {
				return fd.Actor
			}
		}
	}
	return nil
}

// person is who an actor names, from which source, through whom, by which write.
func person(a *drift.Actor) string {
	if a == nil {
		return ""
	}
	return a.User + " from " + a.From + " via " + a.Via + " write " + a.AuditID
}

// objectActor is the person the report names on a Missing or Extra object (nil: none).
func objectActor(rep *drift.Report, kind, name string) *drift.Actor {
	for _, o := range rep.Objects {
		if o.Kind == kind && o.Name == name {
			return o.Actor
		}
	}
	return nil
}
