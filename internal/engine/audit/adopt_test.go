package audit

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/testing/gittest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestAdoptPatchesEndTheirDrift: hand edits of six kinds with the real kubectl (replicas, an image
// that the overlay's images: names, an added label, a removed env var, a ConfigMap key, an added
// annotation) and one to a Secret. Then, one drifted field at a time, the "adopt into Git" patch
// of its chat message is applied with `git apply` in a person's clone of the fixture's
// repository, committed and pushed; the audit at the pushed commit no longer lists that field,
// nor anything it did not list before. The Secret's drift is the one that cannot be adopted: its
// values are never shown, so no patch can carry them. `auditor diff -o patch` gives the same
// adoption as one patch.
func TestAdoptPatchesEndTheirDrift(t *testing.T) {
	testcluster.Need(t)
	f := newFixture(t)
	api, inference, rag, system := f.NS("api"), f.NS("inference"), f.NS("rag"), f.NS("system")
	require.NoError(t, f.Write("base/api/secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: rag-api-token\n  namespace: "+api+"\nstringData:\n  token: git-value\n"))
	f.Edit("base/api/kustomization.yaml", "resources:", "resources:\n  - secret.yaml")
	f.Sync(f.Commit("add a secret"))

	f.KubectlEdit(rag, "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	f.Kubectl("-n", api, "set", "image", "deployment/rag-api", "api=registry.example.com/llm/rag-api:1.4.3")
	f.Kubectl("-n", api, "label", "deployment/rag-api", "team=search")
	f.Kubectl("-n", inference, "set", "env", "deployment/vllm-qwen", "-c", "vllm", "HF_HUB_OFFLINE-")
	f.Kubectl("-n", system, "patch", "configmap", "auditor-config", "--type=merge", `-p={"data":{"config.yaml":"repo: https://git.example.com/platform/llm-gitops.git\nenvs: [prod]\n"}}`)
	f.Kubectl("-n", api, "annotate", "service/rag-api", "example.com/owner=search-team")
	f.Kubectl("-n", api, "patch", "secret", "rag-api-token", `-p={"stringData":{"token":"live-value"}}`)

	adoptable := []string{
		"ConfigMap/auditor-config .data[\"config.yaml\"]",
		"Deployment/rag-api .metadata.labels.team",
		"Deployment/rag-api .spec.template.spec.containers[name=api].image",
		"Deployment/vllm-qwen .spec.template.spec.containers[name=vllm].env[name=HF_HUB_OFFLINE]",
		"Service/rag-api .metadata.annotations[\"example.com/owner\"]",
		"StatefulSet/qdrant .spec.replicas",
	}
	const secret = "Secret/rag-api-token .data.token"
	rep := f.auditAt(f.Head)
	require.ElementsMatch(t, append([]string{secret}, adoptable...), drifted(rep), "report:\n%s", dump(rep))

	// A person's clone; a push updates the fixture's work tree, which the audit reads.
	f.Git("config", "receive.denyCurrentBranch", "updateInstead")
	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Run(t, t.TempDir(), "clone", "-q", f.Dir, clone)

	t.Run("auditor diff -o patch", func(t *testing.T) {
		cmd := exec.Command(buildAuditor(t), "diff", "--env", "prod", "--repo", f.Dir, "--kubeconfig", cluster.Kubeconfig, "-o", "patch")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "exit 1 for drift; stderr:\n%s", stderr.String())
		require.Equal(t, 1, ee.ExitCode(), "stderr:\n%s", stderr.String())
		assert.Equal(t, "not adopted: Secret "+api+"/rag-api-token: values of a Secret are never shown (re-encrypt the live value with your secrets workflow)\n", stderr.String())
		gittest.Run(t, clone, "checkout", "-q", "-b", "adopt-all")
		applyCommitPush(t, clone, stdout.String(), "adopt all", "adopt-all")
		after := f.auditAt(gittest.Run(t, clone, "rev-parse", "HEAD"))
		assert.Equal(t, []string{secret}, drifted(after), "after the whole patch:\n%s\npatch:\n%s", dump(after), stdout.String())
		gittest.Run(t, clone, "checkout", "-q", "main")
	})

	opts := notify.Options{ReadFile: func(rev, name string) ([]byte, error) {
		repo, err := gitrepo.Open(f.Dir)
		if err != nil {
			return nil, err
		}
		return repo.ReadFile(rev, name)
	}}
	var adopted []string
	notAdopted := map[string]string{}
	for {
		var next *notify.Item
		for _, it := range notify.Items(rep) {
			if k := itemName(it); !slices.Contains(adopted, k) && notAdopted[k] == "" {
				next = &it
				break
			}
		}
		if next == nil {
			break
		}
		k := itemName(*next)
		line := adoptLine(t, notify.DriftMessage(*next, opts))
		if !line.Code {
			notAdopted[k] = line.Text
			continue
		}
		t.Logf("adopting %s with:\n%s", k, line.Text)
		before := drifted(rep)
		applyCommitPush(t, clone, line.Text, "adopt "+k, "main")
		rep = f.auditAt(gittest.Run(t, clone, "rev-parse", "HEAD"))
		assert.NotContains(t, drifted(rep), k, "still drifts after its patch:\n%s\nreport:\n%s", line.Text, dump(rep))
		assert.Subset(t, before, drifted(rep), "new drift after adopting %s:\n%s", k, line.Text)
		adopted = append(adopted, k)
	}
	sort.Strings(adopted)
	assert.Equal(t, adoptable, adopted)
	assert.Equal(t, map[string]string{secret: "not generated for a Secret (values are never shown): re-encrypt the live value with your secrets workflow"}, notAdopted)
	assert.Equal(t, []string{secret}, drifted(rep), "Git says what runs, but for the Secret:\n%s", dump(rep))
}

// auditAt audits the fixture's env at a revision, not the synced one: the drift left if Git said
// what that revision says.
func (f *fixture) auditAt(rev string) *drift.Report {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo, err := gitrepo.Open(f.Dir)
	require.NoError(f.t, err)
	cache, err := live.New(ctx, cluster.Config)
	require.NoError(f.t, err)
	a := New(Config{Repo: repo, Live: cache})
	a.AppName = func(string) string { return f.App() }
	rep, err := a.Run(ctx, Request{Env: f.Env, Revision: rev})
	require.NoError(f.t, err)
	return rep
}

// drifted names each drifted field of a report "Kind/name path", sorted.
func drifted(rep *drift.Report) []string {
	var out []string
	for _, it := range notify.Items(rep) {
		out = append(out, itemName(it))
	}
	sort.Strings(out)
	return out
}

func itemName(it notify.Item) string {
	s := it.Object.Kind + "/" + it.Object.Name
	if f := it.Field(); f != nil {
		s += " " + f.Path
	}
	return s
}

// adoptLine is the message's "Adopt into Git" line.
func adoptLine(t *testing.T, m message.Message) message.Line {
	t.Helper()
	for _, l := range m.Lines {
		if strings.HasPrefix(l.Label, "Adopt into Git") {
			return l
		}
	}
	t.Fatalf("no adopt line in:\n%s", m.PlainText())
	return message.Line{}
}

// applyCommitPush applies a patch with `git apply` in a clone, commits and pushes the branch.
func applyCommitPush(t *testing.T, clone, patch, msg, branch string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "adopt.diff")
	require.NoError(t, os.WriteFile(p, []byte(patch), 0o644))
	gittest.Run(t, clone, "apply", "--check", p)
	gittest.Run(t, clone, "apply", p)
	gittest.Run(t, clone, "add", "-A")
	gittest.Run(t, clone, "commit", "-qm", msg)
	gittest.Run(t, clone, "push", "-q", "origin", branch)
}
