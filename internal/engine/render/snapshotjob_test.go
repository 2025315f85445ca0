package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fakeQdrant answers the part of Qdrant's REST API the snapshot job calls, with the JSON shapes of
// Qdrant's documentation: GET /aliases, GET /collections, POST /collections/{c}/snapshots (a
// snapshot description with name, size and checksum), GET and DELETE
// /collections/{c}/snapshots/{name}. Every call needs header api-key.
type fakeQdrant struct {
	mu        sync.Mutex
	data      map[string][]byte // collection -> snapshot content
	snapshots map[string][]byte // live snapshots on "Qdrant's volume"
	badSum    bool              // report a wrong checksum
}

func (f *fakeQdrant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("api-key") != "key" {
		http.Error(w, `{"status":{"error":"Must provide an API key"}}`, http.StatusUnauthorized)
		return
	}
	reply := func(v any) { _ = json.NewEncoder(w).Encode(map[string]any{"result": v, "status": "ok", "time": 0.001}) }
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/aliases":
		reply(map[string]any{"aliases": []any{map[string]string{"alias_name": "docs-live", "collection_name": "docs"}}})
	case r.Method == http.MethodGet && r.URL.Path == "/collections":
		var cs []any
		for c := range f.data {
			cs = append(cs, map[string]string{"name": c})
		}
		reply(map[string]any{"collections": cs})
	case r.Method == http.MethodPost && len(parts) == 3 && parts[2] == "snapshots":
		content := f.data[parts[1]]
		name := parts[1] + "-4242-2026-11-30-21-30-00.snapshot"
		f.snapshots[name] = content
		sum := sha256.Sum256(content)
		checksum := hex.EncodeToString(sum[:])
		if f.badSum {
			checksum = strings.Repeat("0", 64)
		}
		reply(map[string]any{"name": name, "creation_time": "2026-11-30T21:30:00", "size": len(content), "checksum": checksum})
	case len(parts) == 4 && parts[2] == "snapshots" && f.snapshots[parts[3]] != nil:
		if r.Method == http.MethodDelete {
			delete(f.snapshots, parts[3])
			reply(true)
			return
		}
		_, _ = w.Write(f.snapshots[parts[3]])
	default:
		http.Error(w, `{"status":{"error":"Not found"}}`, http.StatusNotFound)
	}
}

// snapshotScript returns the shell script of container name (init containers included) of the
// rendered CronJob qdrant-snapshot.
func snapshotScript(t *testing.T, name string) string {
	t.Helper()
	for _, o := range renderRepo(t, "prod").Objects {
		if o.GetKind() != "CronJob" || o.GetName() != "qdrant-snapshot" {
			continue
		}
		for _, field := range []string{"initContainers", "containers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "jobTemplate", "spec", "template", "spec", field)
			for _, c := range cs {
				cm := c.(map[string]any)
				if cm["name"] == name {
					args, _, _ := unstructured.NestedStringSlice(cm, "args")
					require.Len(t, args, 1)
					return args[0]
				}
			}
		}
	}
	t.Fatalf("CronJob llm-rag/qdrant-snapshot has no container %s", name)
	return ""
}

// TestQdrantSnapshotScript runs the snapshot job's script (init container `snapshot`, as the
// overlays render it) with sh and curl against a stand-in of Qdrant's API: every collection's
// snapshot lands in the night's folder with SHA256SUMS and aliases.json, and every snapshot is
// deleted from Qdrant again, also when its checksum does not match (then the script fails).
// The image runs busybox sh; this runs the machine's sh.
func TestQdrantSnapshotScript(t *testing.T) {
	for _, bin := range []string{"sh", "curl", "sha256sum"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found: CI must have it", bin)
			}
			t.Skipf("SKIPPED LOUDLY: %s not found, the snapshot script is not exercised", bin)
		}
	}
	script := snapshotScript(t, "snapshot")
	run := func(t *testing.T, q *fakeQdrant, key string) (string, error) {
		srv := httptest.NewServer(q)
		t.Cleanup(srv.Close)
		scratch := t.TempDir()
		s := strings.ReplaceAll(script, "http://qdrant.llm-rag.svc:6333", srv.URL)
		s = strings.ReplaceAll(s, "/scratch", scratch)
		cmd := exec.Command("sh", "-ec", s)
		cmd.Env = append(os.Environ(), "QDRANT_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		return scratch, err
	}
	newQdrant := func() *fakeQdrant {
		return &fakeQdrant{snapshots: map[string][]byte{},
			data: map[string][]byte{"docs": []byte(strings.Repeat("vectors", 5000)), "faq_v2": []byte("faq")}}
	}

	t.Run("ships every collection", func(t *testing.T) {
		q := newQdrant()
		scratch, err := run(t, q, "key")
		require.NoError(t, err)
		nights, err := filepath.Glob(filepath.Join(scratch, "out", "*"))
		require.NoError(t, err)
		require.Len(t, nights, 1)
		assert.Regexp(t, `/out/\d{8}T\d{6}Z$`, nights[0])
		sums, err := os.ReadFile(filepath.Join(nights[0], "SHA256SUMS"))
		require.NoError(t, err)
		for c, content := range q.data {
			got, err := os.ReadFile(filepath.Join(nights[0], c+".snapshot"))
			require.NoError(t, err)
			assert.Equal(t, content, got, c)
			sum := sha256.Sum256(content)
			assert.Contains(t, string(sums), hex.EncodeToString(sum[:])+"  "+c+".snapshot")
		}
		aliases, err := os.ReadFile(filepath.Join(nights[0], "aliases.json"))
		require.NoError(t, err)
		assert.Contains(t, string(aliases), `"alias_name":"docs-live"`)
		assert.Empty(t, q.snapshots, "snapshots left on Qdrant's volume")
	})
	t.Run("checksum mismatch fails, snapshot deleted anyway", func(t *testing.T) {
		q := newQdrant()
		q.badSum = true
		_, err := run(t, q, "key")
		require.Error(t, err)
		assert.Empty(t, q.snapshots, "snapshots left on Qdrant's volume")
	})
	t.Run("wrong API key fails", func(t *testing.T) {
		_, err := run(t, newQdrant(), "wrong")
		require.Error(t, err)
	})
}
