package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestChatNamesThePeople: the daemon follows the real API server's audit log (written with the
// platform's policy); alice's `kubectl edit` and bob's `kubectl set env X-` (a removal) reach chat
// naming each of them.
func TestChatNamesThePeople(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.AuditEvents = AuditEventsConfig{File: cluster.AuditLog}
	start(t, cfg)

	out, err := editAs("alice", h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	require.NoError(t, err, "%s", out)
	out, err = cluster.Kubectl(context.Background(), "--context", "bob", "-n", h.p.NS("api"), "set", "env", "deployment/rag-api", "-c", "api", "QDRANT_URL-").CombinedOutput()
	require.NoError(t, err, "%s", out)

	r := h.receivers[0]
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		all := strings.Join(r.messages(), "\n")
		if strings.Contains(all, "QDRANT") && strings.Contains(all, "qdrant") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	all := strings.Join(r.messages(), "\n---\n")
	require.Contains(t, all, "QDRANT", "bob's removal never reached chat")
	for _, line := range strings.Split(all, "\n") {
		if strings.Contains(line, "spec.replicas") && strings.Contains(line, "→") {
			assert.Contains(t, line, "alice", "qdrant's replicas without alice:\n%s", all)
		}
		if strings.Contains(line, "QDRANT_URL") && strings.Contains(line, "→") {
			assert.Contains(t, line, "bob", "the removed env var without bob:\n%s", all)
		}
	}
	assert.Contains(t, all, "alice")
	assert.Contains(t, all, "bob")
}

// TestVanishedDriftIsStillAnnounced: drift held back for its person and gone by the next report
// (reverted by selfHeal meanwhile) is handed on, whole objects and single fields alike.
func TestVanishedDriftIsStillAnnounced(t *testing.T) {
	obj := func(name string, paths ...string) drift.Object {
		o := drift.Object{Kind: "StatefulSet", Namespace: "llm-rag", Name: name, Status: drift.Modified}
		for _, p := range paths {
			o.Fields = append(o.Fields, drift.Field{Path: p})
		}
		return o
	}
	held := &drift.Report{Env: "prod", Objects: []drift.Object{obj("qdrant", ".spec.replicas"), obj("pg", ".spec.replicas", ".metadata.labels.x")}}
	cur := &drift.Report{Env: "prod", Objects: []drift.Object{obj("pg", ".spec.replicas")}}
	got := vanished(held, cur)
	assert.Equal(t, []drift.Object{obj("qdrant", ".spec.replicas"), obj("pg", ".metadata.labels.x")}, got)
	assert.Empty(t, vanished(nil, cur))
	assert.Empty(t, vanished(cur, cur))
}

// TestWebhookFedDaemonNamesThePerson: kube-apiserver's own audit webhook backend (batch mode,
// posting with an identity allowed to create audit-events.auditor.platform.llm, checked by the
// daemon with a TokenReview and a SubjectAccessReview) feeds the daemon; alice's edit reaches chat
// with her name.
func TestWebhookFedDaemonNamesThePerson(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.API = APIConfig{Auth: APIAuthKubernetes}
	cfg.AuditEvents = AuditEventsConfig{Webhook: true}
	require.NoError(t, cfg.validate())
	d := start(t, cfg)
	require.NoError(t, cluster.SetAuditWebhook("http://"+d.d.Addr()+"/api/v1/audit-events"))
	t.Cleanup(func() { _ = cluster.SetAuditWebhook("") })

	out, err := editAs("alice", h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	require.NoError(t, err, "%s", out)

	msgs := h.receivers[0].waitMessages(t, 1, 30*time.Second)
	assert.Contains(t, msgs[0], "qdrant")
	assert.Contains(t, msgs[0], "alice", "the webhook's event named her:\n%s\ndaemon log:\n%s\napiserver log:\n%s", msgs[0], grep(d.log.String(), "audit"), tailLog(cluster.Dir, "kube-apiserver.log"))
}

func tailLog(dir, name string) string {
	data, _ := os.ReadFile(filepath.Join(dir, name))
	lines := strings.Split(string(data), "\n")
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "webhook") || strings.Contains(l, "audit") {
			out = append(out, l)
		}
	}
	if len(out) > 20 {
		out = out[len(out)-20:]
	}
	return strings.Join(out, "\n")
}

// TestBorrowedControllerNameReachesChat: alice scales rag-api (which an HPA targets; Git declares
// 3 replicas here, so the API server records who owns them) through the scale subresource under
// kube-controller-manager's field-manager name. The watch sees the write
// before its audit event is read (the log is followed every second): the daemon first excuses it
// on the name, audits the object again once the event is in, and announces the drift naming
// alice and the borrowed name.
func TestBorrowedControllerNameReachesChat(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	h.p.Edit("base/api/rag-api.yaml", "spec:\n  revisionHistoryLimit: 3", "spec:\n  replicas: 3\n  revisionHistoryLimit: 3")
	h.p.Sync(h.p.Commit("rag-api: 3 replicas in Git"))
	cfg := h.config(t.TempDir())
	cfg.AuditEvents = AuditEventsConfig{File: cluster.AuditLog}
	d := start(t, cfg)
	rep, err := d.d.Report("prod")
	require.NoError(t, err)
	require.True(t, rep.InSync, "%s", jsonOf(rep))

	out, err := cluster.Kubectl(context.Background(), "--context", "alice", "-n", h.p.NS("api"), "patch", "deployment/rag-api", "--subresource=scale",
		"--field-manager=kube-controller-manager", "--type=merge", `-p={"spec":{"replicas":7}}`).CombinedOutput()
	require.NoError(t, err, "%s", out)
	r := h.receivers[0]
	var line string
	assert.Eventually(t, func() bool {
		for _, m := range r.messages() {
			for _, l := range strings.Split(m, "\n") {
				if strings.Contains(l, "spec.replicas") && strings.Contains(l, "rag-api") || strings.Contains(l, "spec.replicas") && strings.Contains(l, "alice") {
					line = l
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "alice's scale never reached chat:\n%s", strings.Join(r.messages(), "\n---\n"))
	if t.Failed() {
		rep, _ := d.d.Report("prod")
		t.Fatalf("report: %s", jsonOf(rep))
	}
	all := strings.Join(r.messages(), "\n")
	assert.Contains(t, all, "alice", "line: %s", line)
	assert.Contains(t, all, "under kube-controller-manager's name")
}

// TestPeopleWaitsHoldANewDriftForItsPerson: a drift whose field has no person yet is held back
// for peopleWait from when it was first seen, on a cluster whose audit events are read; one
// with a person, or on a cluster without events, is not. A controller rule's excusal is audited
// again for as long, without holding the report.
func TestPeopleWaitsHoldANewDriftForItsPerson(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	p := newPeopleWaits(func(cluster string) bool { return cluster == "" })
	p.now = func() time.Time { return now }
	qdrant := drift.Object{Kind: "StatefulSet", Namespace: "llm-rag", Name: "qdrant", Status: drift.Modified,
		Fields: []drift.Field{{Path: ".spec.replicas"}}}
	named := drift.Object{Kind: "Deployment", Namespace: "llm-api", Name: "rag-api", Status: drift.Modified,
		Fields: []drift.Field{{Path: ".spec.replicas", Actor: &drift.Actor{User: "alice"}}}}
	edge := qdrant
	edge.Cluster = "edge" // no audit events from there
	excused := drift.Unverified{Ref: drift.Ref{Group: "apps", Kind: "Deployment", Namespace: "llm-api", Name: "vllm"}, Fingerprint: "f1"}
	rep := &drift.Report{Env: "prod", Objects: []drift.Object{qdrant, named, edge}, Unverified: []drift.Unverified{excused}}

	hold, again := p.check(rep)
	assert.True(t, hold)
	assert.Equal(t, []drift.Ref{drift.RefOfObject(&qdrant), excused.Ref}, again)

	now = now.Add(peopleWait - time.Second)
	hold, again = p.check(rep)
	assert.True(t, hold, "released before peopleWait")
	assert.Len(t, again, 2)

	now = now.Add(time.Second)
	hold, again = p.check(rep)
	assert.False(t, hold, "held past peopleWait: announced without a person")
	assert.Empty(t, again)

	// Gone from a report, then back: waited for anew. Another env's report forgets nothing here.
	hold, _ = p.check(&drift.Report{Env: "staging", Objects: []drift.Object{qdrant}})
	assert.True(t, hold)
	hold, _ = p.check(&drift.Report{Env: "prod"})
	assert.False(t, hold)
	hold, _ = p.check(rep)
	assert.True(t, hold, "a drift back after it was gone was not waited for anew")

	held := &drift.Report{Env: "prod"}
	p.hold(held)
	assert.Same(t, held, p.take("prod"))
	assert.Nil(t, p.take("prod"), "a held report is taken once")
}

// TestPeopleWaitsHoldAWriteThroughArgoCDForItsUser: a field whose person is argocd-server's
// ServiceAccount, its Argo CD user not named yet, is held back as one without a person; named
// from Argo CD's record, or past peopleWait, it is not.
func TestPeopleWaitsHoldAWriteThroughArgoCDForItsUser(t *testing.T) {
	const server = "system:serviceaccount:argocd:argocd-server"
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	people := auditlog.NewStore(0)
	people.SetArgoCDServer(server)
	p := newPeopleWaits(func(cluster string) bool { return cluster == "" })
	p.now, p.unnamed = func() time.Time { return now }, people.ViaArgoCDServer
	object := func(a *drift.Actor) *drift.Report {
		return &drift.Report{Env: "prod", Objects: []drift.Object{{Kind: "StatefulSet", Namespace: "llm-rag", Name: "qdrant",
			Status: drift.Modified, Fields: []drift.Field{{Path: ".spec.replicas", Actor: a}}}}}
	}
	hold, again := p.check(object(&drift.Actor{User: server, From: auditlog.SourceAuditLog}))
	assert.True(t, hold, "argocd-server's write waits for its user")
	assert.Len(t, again, 1)
	gone := &drift.Report{Env: "prod-gone", Objects: []drift.Object{{Kind: "ConfigMap", Namespace: "llm-rag", Name: "settings", Status: drift.Missing}}}
	hold, _ = p.check(gone)
	assert.True(t, hold, "a deletion waits for its person")
	deleted := &drift.Report{Env: "prod-deleted", Objects: []drift.Object{{Kind: "PodDisruptionBudget", Namespace: "llm-rag", Name: "qdrant",
		Status: drift.Missing, Actor: &drift.Actor{User: server, Verb: "delete", From: auditlog.SourceAuditLog}}}}
	hold, _ = p.check(deleted)
	assert.True(t, hold, "argocd-server's deletion waits for its user")
	now = now.Add(peopleWait)
	hold, _ = p.check(deleted)
	assert.False(t, hold, "past peopleWait: the deletion announced with the ServiceAccount")
	hold, _ = p.check(object(&drift.Actor{User: server, From: auditlog.SourceAuditLog}))
	assert.False(t, hold, "past peopleWait: announced with the ServiceAccount")
	// Fresh fields (another env): a person named is not waited for.
	for _, a := range []*drift.Actor{{User: "alice", Via: server, From: auditlog.SourceArgoCD}, {User: "bob", From: auditlog.SourceAuditLog}} {
		rep := object(a)
		rep.Env = "staging-" + a.User
		hold, _ = p.check(rep)
		assert.False(t, hold, "%s named", a.User)
	}
}
