package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/daemon"
	"github.com/llm-gitops/platform/internal/testfixture"
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

// startDaemon runs `auditor serve` in-process for the fixture's prod, posting to c.
func startDaemon(t *testing.T, f *testfixture.Platform, c *chat) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "slack-url"), []byte(c.srv.URL+"/services/T/B/X"), 0o600))
	cfgFile := filepath.Join(dir, "auditor.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`repo: `+f.Dir+`
envs: [prod]
kubeconfig: `+cluster.Kubeconfig+`
appNamePrefix: `+f.Prefix+`-llm-
stateDir: `+filepath.Join(dir, "state")+`
listen: 127.0.0.1:0
api: {auth: none}
debounce: 20ms
foldWindow: 300ms
sinks:
  - name: slack
    slack: {urlFile: `+filepath.Join(dir, "slack-url")+`}
`), 0o600))
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
}

// TestSelfHealRevertsAndTheDaemonSaysBy: with selfHeal on (as Git has it), real Argo CD reverts a
// kubectl edit; the daemon posts the drift once and then its end — reverted by
// argocd-controller after N s — and nothing else about it.
func TestSelfHealRevertsAndTheDaemonSaysBy(t *testing.T) {
	f := platformWith(t, testfixture.Options{SelfHeal: true})
	c := newChat(t)
	startDaemon(t, f, c)
	require.Empty(t, c.messages(), "a freshly synced env has nothing to say")

	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	resolved := func(m string) bool { return strings.Contains(m, "Resolved") && strings.Contains(m, "qdrant") }
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, m := range c.messages() {
			if resolved(m) {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no resolution posted; messages:\n%s", strings.Join(c.messages(), "\n---\n"))

	cs, err := cluster.Clientset()
	require.NoError(t, err)
	sts, err := cs.AppsV1().StatefulSets(f.NS("rag")).Get(context.Background(), "qdrant", metav1.GetOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, *sts.Spec.Replicas, "Argo CD set replicas back to Git's")

	var drifts, ends []string
	for _, m := range c.messages() {
		switch {
		case resolved(m):
			ends = append(ends, m)
		case strings.Contains(m, "qdrant"):
			drifts = append(drifts, m)
		}
	}
	assert.Len(t, drifts, 1, "the drift is posted once:\n%s", strings.Join(c.messages(), "\n---\n"))
	require.Len(t, ends, 1, "its end is posted once:\n%s", strings.Join(c.messages(), "\n---\n"))
	assert.Contains(t, ends[0], "spec.replicas")
	assert.Regexp(t, `reverted by argocd-controller (after [0-9]+s|within 1s)`, ends[0])
}
