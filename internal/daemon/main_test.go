package daemon

import (
	"k8s.io/utils/ptr"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/llm-gitops/platform/internal/daemon/sinks"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	render.ServeWorkerIfChild() // the daemon renders in a child process of this test binary
	os.Exit(testcluster.Main(m, testcluster.Options{AuditWebhook: true}, &cluster))
}

// receiver is a real HTTP chat endpoint on loopback that records payloads and can fail on demand.
type receiver struct {
	name string
	srv  *httptest.Server
	mu   sync.Mutex
	got  []string
	at   []time.Time
	fail int // answer 503 while > 0... or always when -1
}

func newReceiver(t testing.TB, name string) *receiver {
	r := &receiver{name: name}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		if r.fail != 0 {
			if r.fail > 0 {
				r.fail--
			}
			r.mu.Unlock()
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		r.got = append(r.got, string(body))
		r.at = append(r.at, time.Now())
		r.mu.Unlock()
		if name == "telegram" {
			_, _ = io.WriteString(w, `{"ok":true,"result":{"message_id":1}}`)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setFail(n int) { r.mu.Lock(); r.fail = n; r.mu.Unlock() }

func (r *receiver) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// waitMessages waits until the receiver holds n messages, failing after timeout.
func (r *receiver) waitMessages(t testing.TB, n int, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := r.messages(); len(m) >= n {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: %d messages after %s, want %d:\n%s", r.name, len(r.messages()), timeout, n, strings.Join(r.messages(), "\n---\n"))
	return nil
}

type harness struct {
	t         testing.TB
	p         *testfixture.Platform
	receivers []*receiver
	secretDir string
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, p: testfixture.New(t, cluster, "../.."), secretDir: t.TempDir()}
	h.receivers = []*receiver{newReceiver(t, "slack"), newReceiver(t, "mattermost"), newReceiver(t, "telegram")}
	return h
}

func (h *harness) secretFile(name, value string) string {
	p := filepath.Join(h.secretDir, name)
	if err := os.WriteFile(p, []byte(value), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// config is a daemon configuration for the harness' platform and receivers.
func (h *harness) config(stateDir string) *Config {
	cfg := &Config{
		Repo: h.p.Dir, Envs: []string{"prod"}, Kubeconfig: cluster.Kubeconfig, AppNamePrefix: ptr.To(h.p.Prefix + "-llm-"),
		StateDir: stateDir, Listen: "127.0.0.1:0", ArgoCDURL: "https://argocd.example.com",
		API:           APIConfig{Auth: APIAuthNone}, // TestAPIRequiresKubernetesAuth covers the default
		FetchInterval: Duration{time.Minute}, Debounce: Duration{20 * time.Millisecond}, FoldWindow: Duration{300 * time.Millisecond},
		Dispatch: DispatchConfig{BackoffBase: Duration{50 * time.Millisecond}, BackoffMax: Duration{200 * time.Millisecond}, Rate: 100, Burst: 100},
		Sinks: []SinkConfig{
			{Name: "slack", Slack: &sinks.SlackConfig{URLFile: h.secretFile("slack", h.receivers[0].srv.URL+"/services/T000/B000/XXXX")}},
			{Name: "mattermost", Mattermost: &sinks.MattermostConfig{URLFile: h.secretFile("mm", h.receivers[1].srv.URL+"/hooks/abc")}},
			{Name: "telegram", Telegram: &sinks.TelegramConfig{TokenFile: h.secretFile("tg", "123456:SECRET-TOKEN"), ChatID: "-100", BaseURL: h.receivers[2].srv.URL}},
		},
	}
	if err := cfg.validate(); err != nil {
		h.t.Fatal(err)
	}
	return cfg
}

// running is a daemon started in the background, with its log captured.
type running struct {
	d      *Daemon
	cancel context.CancelFunc
	done   chan error
	log    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func start(t testing.TB, cfg *Config) *running {
	t.Helper()
	buf := &syncBuffer{}
	d, err := New(cfg, cluster.Config, slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, done: make(chan error, 1), log: buf}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(r.stop)
	// Readiness waits for every env's first render; kustomize takes tens of seconds on an env of
	// thousands of objects, longer when the other test packages share the cores.
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if addr := d.Addr(); addr != "" {
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return r
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("daemon not ready after 3m; log:\n%s", buf.String())
	return nil
}

func (r *running) stop() {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
	}
}

func (r *running) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.d.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

var _ = fmt.Sprint
