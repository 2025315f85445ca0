package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/daemon"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// chat is a Slack-compatible webhook on loopback that records what it is sent.
type chat struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func newChat(t *testing.T) *chat {
	c := &chat{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, string(body))
		c.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *chat) messages() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// startDaemon runs `auditor serve` in-process for the fixture's prod, posting to c; extra is
// more of its config (YAML). Its API is open unless extra has an api: line.
func startDaemon(t *testing.T, f *testfixture.Platform, c *chat, extra ...string) *daemon.Daemon {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "slack-url"), []byte(c.srv.URL+"/services/T/B/X"), 0o600))
	cfgFile := filepath.Join(dir, "auditor.yaml")
	api := "api: {auth: none}" // unless extra says how the API authenticates
	if slices.ContainsFunc(extra, func(s string) bool { return strings.HasPrefix(s, "api:") }) {
		api = ""
	}
	require.NoError(t, os.WriteFile(cfgFile, []byte(`repo: `+f.Dir+`
envs: [prod]
kubeconfig: `+cluster.Kubeconfig+`
appNamePrefix: `+f.Prefix+`-llm-
stateDir: `+filepath.Join(dir, "state")+`
listen: 127.0.0.1:0
`+api+`
debounce: 20ms
foldWindow: 300ms
sinks:
  - name: slack
    slack: {urlFile: `+filepath.Join(dir, "slack-url")+`}
`+strings.Join(extra, "\n")), 0o600))
	cfg, err := daemon.LoadConfig(cfgFile)
	require.NoError(t, err)
	d, err := daemon.New(cfg, cluster.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if d.Addr() == "" {
			return false, nil
		}
		resp, err := http.Get("http://" + d.Addr() + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "daemon never ready")
	return d
}

// waitChat waits until a message satisfies ok, failing the test after timeout.
func (c *chat) wait(t *testing.T, what string, ok func(string) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, m := range c.messages() {
			if ok(m) {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no %s posted; messages:\n%s", what, strings.Join(c.messages(), "\n---\n"))
}

// settle makes a hand edit of its own (an Extra ConfigMap) and waits for its message: a positive
// signal that the daemon has audited and posted everything before it.
func settle(t *testing.T, f *testfixture.Platform, c *chat, name string) {
	t.Helper()
	f.Kubectl("-n", f.NS("api"), "create", "configmap", name, "--from-literal=k=v")
	// Argo CD does not track it, and the namespace outlives the fixture (Delete=false): go with the test.
	t.Cleanup(func() {
		_, _ = cluster.Kubectl(context.Background(), "-n", f.NS("api"), "delete", "configmap", name).CombinedOutput()
	})
	c.wait(t, "message about "+name, func(m string) bool { return strings.Contains(m, name) })
}

// about splits the messages mentioning qdrant into drift and resolution notices.
func about(msgs []string) (drifts, ends []string) {
	for _, m := range msgs {
		switch {
		case strings.Contains(m, "Resolved") && strings.Contains(m, "qdrant"):
			ends = append(ends, m)
		case strings.Contains(m, "qdrant"):
			drifts = append(drifts, m)
		}
	}
	return drifts, ends
}

func qdrantReplicas(t *testing.T, f *testfixture.Platform) int32 {
	t.Helper()
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	sts, err := cs.AppsV1().StatefulSets(f.NS("rag")).Get(context.Background(), "qdrant", metav1.GetOptions{})
	require.NoError(t, err)
	return *sts.Spec.Replicas
}

// TestSelfHealRevertsAndTheDaemonSaysBy: with selfHeal on (as Git has it), real Argo CD reverts a
// kubectl edit; the daemon posts the drift once and then its end — reverted by
// argocd-controller after N s — and nothing else about it.
func TestSelfHealRevertsAndTheDaemonSaysBy(t *testing.T) {
	testcluster.Need(t)
	f := platformWith(t, testfixture.Options{SelfHeal: true})
	c := newChat(t)
	startDaemon(t, f, c)

	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	c.wait(t, "resolution", func(m string) bool { return strings.Contains(m, "Resolved") && strings.Contains(m, "qdrant") })
	assert.EqualValues(t, 1, qdrantReplicas(t, f), "Argo CD set replicas back to Git's")
	f.Refresh() // Argo CD compares again: its status changes no more, and the daemon says no more
	settle(t, f, c, "selfheal-marker")

	drifts, ends := about(c.messages())
	all := strings.Join(c.messages(), "\n---\n")
	assert.Len(t, drifts, 1, "the drift is posted once:\n%s", all)
	require.Len(t, ends, 1, "its end is posted once:\n%s", all)
	assert.Contains(t, ends[0], "spec.replicas")
	assert.Regexp(t, `reverted by argocd-controller (after [0-9]+s|within 1s)`, ends[0])
}

// TestSelfHealOffTheDriftStands: with selfHeal off, Argo CD compares again and again and leaves
// the edit in place; the daemon posts the drift once and never a resolution.
func TestSelfHealOffTheDriftStands(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	c := newChat(t)
	startDaemon(t, f, c)

	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	c.wait(t, "drift", func(m string) bool { return strings.Contains(m, "qdrant") })
	f.Refresh()
	f.Refresh()
	settle(t, f, c, "selfheal-off-marker")

	assert.EqualValues(t, 3, qdrantReplicas(t, f), "without selfHeal the edit stands")
	drifts, ends := about(c.messages())
	all := strings.Join(c.messages(), "\n---\n")
	assert.Len(t, drifts, 1, "the drift is posted once:\n%s", all)
	assert.Empty(t, ends, "nothing resolved it:\n%s", all)
	assert.Contains(t, outOfSync(f.Application()), "apps/StatefulSet "+f.NS("rag")+"/qdrant", "Argo CD's status says so too")
}
