package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestCLIDiff runs `auditor diff` as a user would: exit codes, text and the JSON contract.
func TestCLIDiff(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	bin := buildAuditor(t)
	args := []string{"diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig}
	out, code := runAuditor(t, bin, args...)
	if code != 0 || !strings.Contains(out, "in sync") {
		t.Fatalf("in sync: exit %d\n%s", code, out)
	}
	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	out, code = runAuditor(t, bin, args...)
	if code != 1 {
		t.Fatalf("drift: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"StatefulSet " + f.NS("rag") + "/qdrant", ".spec.replicas", "1 → 3", "kubectl-edit (Update)", "ago"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	out, code = runAuditorStdout(t, bin, append(args, "-o", "json")...)
	if code != 1 {
		t.Fatalf("json drift: exit %d\n%s", code, out)
	}
	var rep drift.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"env", "revision", "inSync", "pendingSync", "objects"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("json lacks %q", k)
		}
	}
	obj := raw["objects"].([]any)[0].(map[string]any)
	fl := obj["fields"].([]any)[0].(map[string]any)
	for _, k := range []string{"path", "desired", "live", "change", "manager", "operation", "subresource", "time"} {
		if _, ok := fl[k]; !ok {
			t.Errorf("json field lacks %q: %v", k, fl)
		}
	}
	if rep.Env != "prod" || rep.InSync || rep.Revision != f.Head || obj["status"] != "Modified" {
		t.Errorf("unexpected report %+v", rep)
	}
}

func TestCLIBadInput(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	bin := buildAuditor(t)
	// An unreachable cluster: a kubeconfig pointing at a closed port.
	dead := filepath.Join(t.TempDir(), "kubeconfig")
	data, _ := os.ReadFile(cluster.Kubeconfig)
	if err := os.WriteFile(dead, []byte(strings.Replace(string(data), strings.TrimPrefix(cluster.URL, "https://"), "127.0.0.1:1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runAuditor(t, bin, "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", dead)
	if code <= 1 || !strings.Contains(out, "unreachable") {
		t.Errorf("unreachable cluster: exit %d\n%s", code, out)
	}
	// A kind whose CRD is not installed (Prometheus Operator's Probe is not among the test CRDs).
	if err := f.Write("base/monitoring/probe.yaml", "apiVersion: monitoring.coreos.com/v1\nkind: Probe\nmetadata:\n  name: blackbox\n  namespace: "+f.NS("monitoring")+"\nspec: {}\n"); err != nil {
		t.Fatal(err)
	}
	f.Edit("base/monitoring/kustomization.yaml", "resources:", "resources:\n  - probe.yaml")
	f.Commit("add a probe")
	out, code = runAuditor(t, bin, "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--revision", "HEAD")
	// The Probe is Unknown (exit 1: the env is not known to be in sync) and the rest is audited.
	if code != 1 || !strings.Contains(out, "Unknown  Probe") || !strings.Contains(out, "CRD") {
		t.Errorf("missing CRD: exit %d\n%s", code, out)
	}
	// A malformed overlay: the error names the file and line.
	f.Edit("overlays/prod/scaling.yaml", "kind:", "kind:\n  bad: [")
	f.Commit("break prod")
	out, code = runAuditor(t, bin, "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "--revision", "HEAD")
	if code <= 1 || !strings.Contains(out, "overlays/prod/scaling.yaml:") {
		t.Errorf("malformed overlay: exit %d\n%s", code, out)
	}
}

// TestCLIDiffApplicationsAndAll: --app reports one Application of the env's group (without a
// root, the env's own), a name the group lacks is a usage error naming those it has; --all
// audits every env of the repository, one report each.
func TestCLIDiffApplicationsAndAll(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	bin := buildAuditor(t)
	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	base := []string{"diff", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig}

	out, code := runAuditorStdout(t, bin, append(base, "--env", "prod", "--app", "llm-prod", "-o", "json")...)
	if code != 1 {
		t.Fatalf("--app llm-prod: exit %d, want 1\n%s", code, out)
	}
	var rep drift.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	if len(rep.Applications) != 1 || rep.Applications[0].Name != "llm-prod" || rep.Applications[0].Objects == 0 {
		t.Errorf("applications: %+v", rep.Applications)
	}
	for _, o := range rep.Objects {
		if o.Application != "llm-prod" {
			t.Errorf("%s %s names Application %q", o.Kind, o.Name, o.Application)
		}
	}

	out, code = runAuditor(t, bin, append(base, "--env", "prod", "--app", "nope")...)
	if code != 2 || !strings.Contains(out, "no Application nope (its Applications: llm-prod)") {
		t.Errorf("--app nope: exit %d, want 2 naming the group's Applications\n%s", code, out)
	}
	out, code = runAuditor(t, bin, append(base, "--env", "prod", "--all")...)
	if code != 2 || !strings.Contains(out, "exclude each other") {
		t.Errorf("--env with --all: exit %d\n%s", code, out)
	}

	out, code = runAuditorStdout(t, bin, append(base, "--all", "-o", "json")...)
	if code != 1 { // dev and staging are not synced to this cluster, and prod drifted
		t.Fatalf("--all: exit %d, want 1\n%s", code, out)
	}
	var reps []drift.Report
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		t.Fatalf("--all json output: %v\n%s", err, out)
	}
	var envs []string
	for _, r := range reps {
		envs = append(envs, r.Env)
	}
	if strings.Join(envs, ",") != "dev,prod,staging" {
		t.Errorf("--all audited %v, want dev, prod, staging", envs)
	}
}
