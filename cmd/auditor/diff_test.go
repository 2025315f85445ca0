package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// TestWriteTextNamesWhoMadeOrDeletedAnObject: a Missing object says who deleted it, an Extra
// one who created it (with the tool managedFields names, when known), from the audit events.
func TestWriteTextNamesWhoMadeOrDeletedAnObject(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	alice := &drift.Actor{User: "alice", Verb: "create", Time: "2026-11-30T09:58:00Z", Match: "created"}
	bob := &drift.Actor{User: "bob", Verb: "delete", Time: "2026-11-30T09:59:00Z", Match: "deleted"}
	creator := &drift.Writer{Manager: "kubectl-create", Operation: "Update", Time: "2026-11-30T09:58:00Z"}
	cases := []struct {
		name string
		obj  drift.Object
		want string
	}{
		{"missing, deleted by", drift.Object{Kind: "ConfigMap", Namespace: "llm-rag", Name: "prompts", Status: drift.Missing, Actor: bob},
			"Missing  ConfigMap llm-rag/prompts: in Git, not in the cluster — deleted by bob (delete 2026-11-30T09:59:00Z)"},
		{"missing, nobody known", drift.Object{Kind: "ConfigMap", Namespace: "llm-rag", Name: "prompts", Status: drift.Missing},
			"Missing  ConfigMap llm-rag/prompts: in Git, not in the cluster\n"},
		{"extra, person and tool", drift.Object{Kind: "ConfigMap", Namespace: "llm-rag", Name: "scratch", Status: drift.Extra, Creator: creator, Actor: alice},
			"Extra    ConfigMap llm-rag/scratch: in the cluster, not in Git — created by alice with kubectl-create (Update) 2m ago"},
		{"extra, the person only", drift.Object{Kind: "ConfigMap", Namespace: "llm-rag", Name: "scratch", Status: drift.Extra, Actor: alice},
			"created by alice (create 2026-11-30T09:58:00Z)"},
		{"extra, the tool only", drift.Object{Kind: "ConfigMap", Namespace: "llm-rag", Name: "scratch", Status: drift.Extra, Creator: creator},
			"Extra    ConfigMap llm-rag/scratch: in the cluster, not in Git — created by kubectl-create (Update) 2m ago"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeText(&b, &drift.Report{Env: "prod", Revision: "abc", Objects: []drift.Object{tc.obj}}, now)
			assert.Contains(t, b.String(), tc.want)
		})
	}
}

// TestWriteTextNamesTheCluster: an Application on another cluster and each of its objects say
// which cluster, as the chat does.
func TestWriteTextNamesTheCluster(t *testing.T) {
	rep := &drift.Report{Env: "prod", Revision: "abc",
		Applications: []drift.Application{{Name: "llm-prod", Path: "overlays/prod", Revision: "abc"},
			{Name: "edge", Cluster: "edge-1", Path: "edge", Revision: "abc", Objects: 1, Drifted: 1}},
		Objects: []drift.Object{{Kind: "ConfigMap", Namespace: "edge", Name: "settings", Cluster: "edge-1", Application: "edge",
			Status: drift.Missing}}}
	var b strings.Builder
	writeText(&b, rep, time.Now())
	assert.Contains(t, b.String(), "Application edge (edge at abc, on cluster edge-1): 1 objects, 1 drifted")
	assert.Contains(t, b.String(), "Missing  ConfigMap edge/settings on cluster edge-1 [edge]: in Git, not in the cluster")
}

// TestWriteTextCountsNotAuditedApart: an Application that could not be audited is said as such
// and is not counted as a drifted object, beside drift or alone.
func TestWriteTextCountsNotAuditedApart(t *testing.T) {
	unaudited := drift.Object{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Namespace: "argocd", Name: "gpu-operator",
		Status: drift.Unknown, Note: drift.NotAuditedPrefix + "chart repository https://helm.ngc.nvidia.com/nvidia: no such host"}
	missing := drift.Object{Kind: "ConfigMap", Namespace: "llm-rag", Name: "prompts", Status: drift.Missing}
	cases := []struct {
		name string
		objs []drift.Object
		want string
	}{
		{"alone", []drift.Object{unaudited}, "no drift in what was audited; 1 Applications not audited (their objects not compared)\n"},
		{"beside drift", []drift.Object{unaudited, missing}, "1 objects drifted, 1 fields; 1 Applications not audited (their objects not compared)\n"},
		{"drift only", []drift.Object{missing}, "1 objects drifted, 1 fields\n"},
		{"nothing", nil, "in sync: no drift\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeText(&b, &drift.Report{Env: "prod", Revision: "abc", Objects: tc.objs}, time.Now())
			assert.True(t, strings.HasSuffix(b.String(), tc.want), "got:\n%s", b.String())
		})
	}
}
