package audit

import (
	"strings"
	"testing"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestArgoCDVerdictBesideOurs checks Argo CD's own diff (argo-cd/v3 util/argo/diff) against the
// auditor's findings: agreement on a changed field, and the flagged disagreement on a field added
// by hand, which Argo CD's diff cannot see.
func TestArgoCDVerdictBesideOurs(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	rep := f.audit()
	if len(rep.ArgoCDOnly) != 0 {
		t.Fatalf("after a fresh sync Argo CD's diff flags objects:\n%s", dump(rep))
	}
	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	f.Kubectl("-n", f.NS("api"), "set", "env", "deployment/rag-api", "LOG_LEVEL=debug")
	f.Kubectl("-n", f.NS("api"), "create", "configmap", "hotfix", "--from-literal=k=v")
	rep = f.audit()
	cases := []struct {
		kind, name string
		outOfSync  bool
		note       string
	}{
		{"StatefulSet", "qdrant", true, ""},
		{"Deployment", "rag-api", false, "invisible to Argo CD"},
		{"ConfigMap", "hotfix", false, "not tracked"},
	}
	for _, tc := range cases {
		o := object(t, rep, tc.kind, tc.name)
		if o.ArgoCD == nil {
			t.Fatalf("%s %s: no Argo CD verdict", tc.kind, tc.name)
		}
		if o.ArgoCD.OutOfSync != tc.outOfSync || !strings.Contains(o.ArgoCD.Note, tc.note) {
			t.Errorf("%s %s: argocd %+v, want outOfSync %v and a note about %q", tc.kind, tc.name, *o.ArgoCD, tc.outOfSync, tc.note)
		}
	}
	// Missing: Argo CD agrees.
	f.Kubectl("-n", f.NS("api"), "delete", "service", "rag-api")
	rep = f.audit()
	if o := object(t, rep, "Service", "rag-api"); o.Status != drift.Missing || o.ArgoCD == nil || !o.ArgoCD.OutOfSync {
		t.Errorf("missing service: %+v", o)
	}
}
