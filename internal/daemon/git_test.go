package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// gitServer is the real `git http-backend` (basic auth) behind a switch that stalls requests,
// counting the bytes of every pack it sends.
type gitServer struct {
	*httptest.Server
	mu     sync.Mutex
	stall  chan struct{} // non-nil: requests wait on it
	packs  []int         // bytes of each git-upload-pack response
	stalls int
	held   int // requests waiting on stall now
}

func newGitServer(t *testing.T, root string) *gitServer {
	g := &gitServer{}
	backend := gittest.HTTPHandler(t, root, "robot", "s3cret-token")
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		stall := g.stall
		if stall != nil {
			g.stalls++
		}
		g.mu.Unlock()
		if stall != nil {
			g.mu.Lock()
			g.held++
			g.mu.Unlock()
			var done bool
			select {
			case <-stall:
			case <-r.Context().Done():
				done = true
			}
			g.mu.Lock()
			g.held--
			g.mu.Unlock()
			if done {
				return
			}
		}
		cw := &countingWriter{ResponseWriter: w}
		backend.ServeHTTP(cw, r)
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			g.mu.Lock()
			g.packs = append(g.packs, cw.n)
			g.mu.Unlock()
		}
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gitServer) setStall(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case on && g.stall == nil:
		g.stall = make(chan struct{})
	case !on && g.stall != nil:
		close(g.stall)
		g.stall = nil
	}
}

// holding says how many requests the stall holds now.
func (g *gitServer) holding() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

func (g *gitServer) packSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.packs...)
}

type countingWriter struct {
	http.ResponseWriter
	n int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += n
	return n, err
}

// TestGitOverAuthenticatedHTTPStallAndIncrementalFetch: the daemon reads the repository from an
// authenticated Git server (credentials from files). The repository has 5,000 commits; after one
// more is pushed the daemon's fetch transfers only that, not the history. When the server stalls
// a hand edit reaches chat while a fetch hangs (audits go on on the last revision), then
// /api/v1/status shows the fetch error, and nothing logs the password.
func TestGitOverAuthenticatedHTTPStallAndIncrementalFetch(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	root := t.TempDir()
	bare := filepath.Join(root, "platform.git")
	gittest.Run(t, root, "clone", "-q", "--bare", h.p.Dir, bare)
	appendHistory(t, bare, 5000)
	srv := newGitServer(t, root)

	cfg := h.config(t.TempDir())
	cfg.Repo = srv.URL + "/platform.git"
	cfg.RepoAuth = gitrepo.RemoteConfig{Username: "robot", PasswordFile: h.secretFile("git-token", "s3cret-token")}
	cfg.FetchTimeout = Duration{10 * time.Second} // long beside the latency of an edit to chat
	cfg.FetchInterval = Duration{300 * time.Millisecond}
	d := start(t, cfg)
	clone := srv.packSizes()
	require.NotEmpty(t, clone, "the daemon cloned over HTTP")

	// One new commit: the next fetch brings it and little else.
	work := gittest.Clone(t, bare)
	gittest.WriteFiles(t, work, map[string]string{"docs/one-more.md": "one more\n"})
	gittest.Run(t, work, "add", ".")
	gittest.Run(t, work, "commit", "-qm", "one more")
	head := gittest.Run(t, work, "rev-parse", "HEAD")
	before := len(srv.packSizes())
	gittest.Run(t, work, "push", "-q", "origin", "HEAD:main")
	require.Eventually(t, func() bool {
		_, body := d.get(t, "/api/v1/drift?env=prod")
		return strings.Contains(body, head) // the head the daemon sees, ahead of the synced one
	}, 20*time.Second, 50*time.Millisecond, "the pushed commit never reached the daemon")
	largest := 0
	for _, n := range srv.packSizes()[before:] {
		largest = max(largest, n)
	}
	t.Logf("clone of 5,000 commits: %d bytes; largest fetch after one new commit: %d bytes", clone[0], largest)
	assert.Less(t, largest*50, clone[0], "a fetch after one commit should move a sliver of the clone")

	// The server stalls: a hand edit made while a fetch hangs reaches chat before that fetch
	// times out (no fetch holds up an audit); then the status shows the fetch error.
	srv.setStall(true)
	defer srv.setStall(false)
	require.Eventually(t, func() bool { return srv.holding() > 0 }, 20*time.Second, 20*time.Millisecond, "no fetch reached the stalled server")
	h.p.KubectlEdit(h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	msgs := h.receivers[1].waitMessages(t, 1, 15*time.Second)
	assert.Contains(t, msgs[0], "qdrant")
	_, body := d.get(t, "/api/v1/status")
	var st Status
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Empty(t, st.Git.Error, "the edit waited for the stalled fetch to time out")
	assert.Positive(t, srv.holding(), "the fetch was still held when the edit reached chat")
	require.Eventually(t, func() bool {
		_, body := d.get(t, "/api/v1/status")
		var st Status
		return json.Unmarshal([]byte(body), &st) == nil && st.Git.Error != ""
	}, 30*time.Second, 50*time.Millisecond, "the status never showed the stalled fetch")
	_, body = d.get(t, "/api/v1/status")
	assert.NotContains(t, body+d.log.String(), "s3cret-token", "the password reached the status or the log")
}

// appendHistory adds n commits to the main branch of a bare repository, each changing one
// small file, with git fast-import.
func appendHistory(t *testing.T, bare string, n int) {
	t.Helper()
	parent := gittest.Run(t, bare, "rev-parse", "main")
	var stream bytes.Buffer
	for i := range n {
		content := fmt.Sprintf("entry %d\n", i)
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter Dev <dev@example.com> %d +0000\ndata 8\nhistory\n", 1_700_000_000+i)
		if i == 0 {
			fmt.Fprintf(&stream, "from %s\n", parent)
		}
		fmt.Fprintf(&stream, "M 100644 inline docs/history.txt\ndata %d\n%s\n", len(content), content)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = bare
	cmd.Env = gittest.Env(t.TempDir())
	cmd.Stdin = &stream
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	_ = os.Remove(filepath.Join(bare, "FETCH_HEAD"))
}
