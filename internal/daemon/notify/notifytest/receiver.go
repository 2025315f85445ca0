package notifytest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/daemon/sinks"
)

// Receiver is a real HTTP server that records the bodies of accepted requests. behave decides
// the status of request n (0-based); a negative status stalls until the client gives up.
type Receiver struct {
	*httptest.Server
	mu     sync.Mutex
	n      int
	bodies [][]byte
	paths  []string
	behave func(n int, w http.ResponseWriter) int
}

// NewReceiver starts a Receiver, closed when the test ends; behave nil accepts every request.
func NewReceiver(t *testing.T, behave func(n int, w http.ResponseWriter) int) *Receiver {
	r := &Receiver{behave: behave}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := r.n
		r.n++
		r.mu.Unlock()
		status := http.StatusOK
		if r.behave != nil {
			status = r.behave(n, w)
		}
		if status < 0 {
			select {
			case <-req.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		if status == http.StatusOK {
			r.mu.Lock()
			r.bodies = append(r.bodies, body)
			r.paths = append(r.paths, req.URL.Path)
			r.mu.Unlock()
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(r.Close)
	return r
}

// Received returns the bodies of the accepted requests, in order.
func (r *Receiver) Received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// Paths returns the URL paths of the accepted requests, in order.
func (r *Receiver) Paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// TextCounts counts the accepted Slack payloads per text (their title).
func (r *Receiver) TextCounts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, b := range r.Received() {
		var p struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		out[p.Text]++
	}
	return out
}

// Slack returns a Slack sink posting to the receiver (its webhook URL in a secret file);
// timeout 0 is the sink's default.
func (r *Receiver) Slack(t *testing.T, timeout time.Duration) *sinks.Slack {
	t.Helper()
	s, err := sinks.NewSlack(sinks.SlackConfig{URLFile: SecretFile(t, r.URL+"/hook/T000/B000/XXXXsupersecretXXXX"), Timeout: metav1.Duration{Duration: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SecretFile writes a secret to a temp file and returns its path.
func SecretFile(t *testing.T, value string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
