package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/drift"
)

var update = flag.Bool("update", false, "rewrite golden files")

const rev = "0123456789abcdef0123456789abcdef01234567"

func deployment(fields ...drift.Field) drift.Object {
	return drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm", Name: "api", Status: drift.Modified, Fields: fields}
}

var (
	kubectlEdit = drift.Writer{Manager: "kubectl-edit", Operation: "Update", Time: "2025-01-02T03:04:05Z"}
	hpa         = drift.Writer{Manager: "kube-controller-manager", Operation: "Update", Subresource: "scale", Time: "2025-01-02T03:05:00Z"}

	fLogLevel = at(drift.Field{Desired: "info", Live: "debug", Change: drift.Changed, Writer: kubectlEdit},
		"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "api"), "env", fieldpath.KeyByFields("name", "LOG_LEVEL"), "value")
	fReplicas = at(drift.Field{Desired: int64(2), Live: int64(5), Change: drift.Changed, Writer: hpa}, "spec", "replicas")
	fAnnot    = at(drift.Field{Live: "ops <team> & co", Change: drift.Added, Writer: kubectlEdit}, "metadata", "annotations", "example.com/owner")
	fTol      = at(drift.Field{Live: map[string]any{"key": "gpu"}, Change: drift.Added, Writer: kubectlEdit}, "spec", "template", "spec", "tolerations", 0)
)

// at gives a field its structured path (fieldpath.MakePath parts) and the display path from it.
func at(f drift.Field, parts ...any) drift.Field {
	p := fieldpath.MakePathOrDie(parts...)
	f.FieldPath, f.Path = drift.FieldPath(p), drift.Display(p)
	return f
}

func report(env, revision string, objs ...drift.Object) *drift.Report {
	return &drift.Report{Env: env, Revision: revision, InSync: len(objs) == 0, Objects: objs}
}

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

// indentJSON pretty-prints a JSON body for golden files.
func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // readable golden files; the payload itself may escape
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// receiver is a real HTTP server that records the bodies of accepted requests. behave decides
// the status of request n (0-based); a negative status stalls until the client gives up.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	n        int
	bodies   [][]byte
	paths    []string
	behave   func(n int, w http.ResponseWriter) int
	attempts int
}

func newReceiver(t *testing.T, behave func(n int, w http.ResponseWriter) int) *receiver {
	r := &receiver{behave: behave}
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

func (r *receiver) received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// secretFile writes a secret to a temp file and returns its path.
func secretFile(t *testing.T, value string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
