package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/daemon"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/gittest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// acme lays down a team's own repository of another layout (internal/engine/layout/testdata/acme: the
// root acme-root over clusters/prod/apps, a Kustomize service under services/web, a Helm chart
// under charts/worker) in a fresh Git repository that Argo CD reads, its names made unique in
// the shared cluster by prefix p. It returns the repository's directory.
func acme(t *testing.T, p string) string {
	t.Helper()
	dir := t.TempDir()
	files := gittest.ReadTree(t, "../engine/layout/testdata/acme", ".")
	delete(files, ".auditor.yaml") // committed later: first the repository as a team has it
	for name, content := range files {
		content = strings.ReplaceAll(content, "REPO_URL", "file://"+dir)
		files[name] = strings.ReplaceAll(content, "acme-", p+"-acme-")
	}
	gittest.WriteFiles(t, dir, files)
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "acme")
	return dir
}

// kubectl runs the real kubectl on the test cluster, failing the test on an error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cluster.Kubectl(context.Background(), args...).CombinedOutput()
	require.NoError(t, err, "kubectl %v: %s", args, out)
	return string(out)
}

// auditorBinary builds the auditor once per test.
func auditorBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "auditor")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/auditor").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// auditorJSON runs `auditor` and decodes its JSON report; the exit code is returned.
func auditorJSON(t *testing.T, bin string, args ...string) (*drift.Report, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var rep drift.Report
	require.NoError(t, json.Unmarshal(out, &rep), "auditor %v: %s\n%s", args, out, stderr.String())
	return &rep, code
}

func TestAnotherLayoutIsAuditedAdoptedAndPosted(t *testing.T) {
	testcluster.Need(t)
	p := fmt.Sprintf("l%d", time.Now().UnixNano()%100000)
	dir := acme(t, p)
	root, web, worker := p+"-acme-root", p+"-acme-web", p+"-acme-worker"
	t.Cleanup(func() {
		_, _ = cluster.Kubectl(context.Background(), "-n", testcluster.ArgoCDNamespace, "delete", "application", root, web, worker, "--ignore-not-found", "--wait=false").CombinedOutput()
		_, _ = cluster.Kubectl(context.Background(), "delete", "namespace", web, worker, "--ignore-not-found", "--wait=false").CombinedOutput()
	})
	kubectl(t, "apply", "-f", filepath.Join(dir, "clusters/prod/root.yaml"))
	for _, app := range []string{root, web, worker} {
		require.Eventually(t, func() bool {
			out, _ := cluster.Kubectl(context.Background(), "-n", testcluster.ArgoCDNamespace, "get", "application", app,
				"-o", "jsonpath={.status.sync.status}").CombinedOutput()
			return string(out) == "Synced"
		}, 3*time.Minute, time.Second, "Argo CD never synced %s", app)
	}

	// Named on the command line by its root, as Argo CD shows it: no overlays/, no .auditor.yaml.
	bin := auditorBinary(t)
	args := []string{"diff", "--env", "prod", "--root", root, "--repo", dir, "--kubeconfig", cluster.Kubeconfig,
		"--audit-log", cluster.AuditLog, "--cache-dir", "off", "-o", "json"}
	rep, code := auditorJSON(t, bin, args...)
	require.Equal(t, 0, code, "in sync after Argo CD's sync: %+v", rep.Objects)
	var apps []string
	for _, a := range rep.Applications {
		assert.Empty(t, a.Error, a.Name)
		apps = append(apps, a.Name)
	}
	assert.ElementsMatch(t, []string{root, web, worker}, apps)

	// Hand edits, by people: each reported with its person and its Application.
	kubectl(t, "--context", "alice", "-n", web, "scale", "deployment/web", "--replicas=5")
	kubectl(t, "--context", "bob", "-n", worker, "set", "env", "deployment/"+worker, "-c", "worker", "DEBUG=1")
	var drifted map[string]drift.Object
	require.Eventually(t, func() bool {
		rep, code = auditorJSON(t, bin, args...)
		drifted = map[string]drift.Object{}
		for _, o := range rep.Objects {
			drifted[o.Kind+" "+o.Namespace+"/"+o.Name] = o
		}
		return code == 1 && len(drifted) == 2
	}, time.Minute, 2*time.Second, "the two edits: %v", drifted)
	w := drifted["Deployment "+web+"/web"]
	assert.Equal(t, web, w.Application)
	require.Len(t, w.Fields, 1)
	assert.Equal(t, ".spec.replicas", w.Fields[0].Path)
	if assert.NotNil(t, w.Fields[0].Actor, "no person on web's replicas") {
		assert.Equal(t, "alice", w.Fields[0].Actor.User)
	}
	k := drifted["Deployment "+worker+"/"+worker]
	assert.Equal(t, worker, k.Application)
	if assert.NotEmpty(t, k.Fields) && assert.NotNil(t, k.Fields[0].Actor, "no person on worker's env") {
		assert.Equal(t, "bob", k.Fields[0].Actor.User)
	}

	// The adopt patch goes into the repository's own overlay of web, and git apply takes it.
	cmd := exec.Command(bin, append(args[:len(args)-2], "-o", "patch")...)
	patch, err := cmd.Output()
	require.Error(t, err, "exit 1: drift")
	require.Contains(t, string(patch), "services/web/prod/")
	apply := exec.Command("git", "apply", "--check", "-")
	apply.Dir, apply.Stdin = dir, strings.NewReader(string(patch))
	out, err := apply.CombinedOutput()
	require.NoError(t, err, "git apply: %s\n%s", out, patch)

	// The daemon, with the guide's minimal config, started before the repository says its layout:
	// prod is then the convention's (root-prod, else llm-prod over overlays/prod), which neither
	// the cluster nor the repository has.
	c := newChat(t)
	state := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(state, "slack-url"), []byte(c.srv.URL+"/services/T/B/X"), 0o600))
	cfgFile := filepath.Join(state, "auditor.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`repo: `+dir+`
envs: [prod]
kubeconfig: `+cluster.Kubeconfig+`
stateDir: `+filepath.Join(state, "state")+`
listen: 127.0.0.1:0
api: {auth: none}
argocdURL: https://argocd.example.com
sinks:
  - name: chat
    slack: {urlFile: `+filepath.Join(state, "slack-url")+`}
`), 0o600))
	cfg, err := daemon.LoadConfig(cfgFile)
	require.NoError(t, err)
	d, err := daemon.New(cfg, cluster.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var prod daemon.EnvStatus
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if d.Addr() == "" {
			return false, nil
		}
		resp, err := http.Get("http://" + d.Addr() + "/api/v1/status")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var st daemon.Status
		if json.NewDecoder(resp.Body).Decode(&st) != nil || !st.Ready || len(st.Envs) != 1 {
			return false, nil
		}
		prod = st.Envs[0]
		return true, nil
	}), "daemon never ready")
	assert.Contains(t, prod.Error, "no overlays/prod/kustomization.yaml", "the convention's env, absent: %+v", prod)
	assert.Empty(t, prod.LayoutError)
	assert.Empty(t, c.messages(), "nothing audited, nothing posted")

	// .auditor.yaml committed: the daemon follows it at its next audit (a push's webhook asks for
	// one), audits acme-root's tree, and the drift reaches chat, linked to the root.
	layoutFile, err := os.ReadFile("../engine/layout/testdata/acme/.auditor.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".auditor.yaml"), []byte(strings.ReplaceAll(string(layoutFile), "acme-", p+"-acme-")), 0o644))
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "the auditor's layout")
	d.TriggerFetch()
	c.wait(t, "the hand edit of web in chat, linked to the root", func(m string) bool {
		return strings.Contains(m, "Deployment") && strings.Contains(m, web+"/web") && strings.Contains(m, "replicas") &&
			strings.Contains(m, "https://argocd.example.com/applications/"+root)
	})
}
