package fleet

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "https://" + addr
}

func kubeconfig(t *testing.T, server string) string {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: `+server+`, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return p
}

// A destination resolves by server URL (a trailing slash aside), else by name; one the config
// does not list is refused with the reason; a cluster that does not answer is an
// *UnreachableError, and its status says so, with the error and since when.
func TestResolve(t *testing.T) {
	server := closedPort(t)
	f, err := New(context.Background(), []Cluster{{Name: "edge-1", Server: server, Kubeconfig: kubeconfig(t, server)}})
	require.NoError(t, err)
	f.ProbeTimeout = time.Second
	before := time.Now().UTC()

	for _, dest := range [][2]string{{server + "/", ""}, {"", "edge-1"}} {
		_, name, err := f.Resolve(context.Background(), dest[0], dest[1])
		var unreachable *UnreachableError
		require.ErrorAs(t, err, &unreachable, "%v", dest)
		assert.Equal(t, "edge-1", name)
		assert.Contains(t, err.Error(), "cluster edge-1 unreachable")
	}
	_, _, err = f.Resolve(context.Background(), "https://other.example.com", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no credentials for that cluster")
	_, _, err = f.Resolve(context.Background(), "", "edge-2")
	assert.ErrorContains(t, err, "destination edge-2")

	sts := f.Status()
	require.Len(t, sts, 1)
	assert.False(t, sts[0].Reachable)
	assert.NotEmpty(t, sts[0].Error)
	assert.False(t, sts[0].Since.Before(before), "since the first probe")
	assert.Empty(t, f.Caches(), "no cache for a cluster that never answered")
	assert.False(t, f.Reachable("edge-1"))
	assert.False(t, f.Reachable("edge-2"), "a name the fleet does not have")
}

// A kubeconfig that cannot be read fails New, naming the cluster and file.
func TestNewNamesABadKubeconfig(t *testing.T) {
	_, err := New(context.Background(), []Cluster{{Name: "edge-1", Server: "https://x", Kubeconfig: "/nonexistent/kubeconfig"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster edge-1: kubeconfig /nonexistent/kubeconfig")
}

// A person's kubeconfig is a fleet: each server its contexts reach but the one already read, by
// the first context's name; a destination none reaches says to add a context.
func TestFromKubeconfig(t *testing.T) {
	home, edge := closedPort(t), closedPort(t)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
clusters:
  - {name: home, cluster: {server: `+home+`, insecure-skip-tls-verify: true}}
  - {name: edge, cluster: {server: `+edge+`, insecure-skip-tls-verify: true}}
users: [{name: u, user: {token: t}}]
contexts:
  - {name: home, context: {cluster: home, user: u}}
  - {name: edge-admin, context: {cluster: edge, user: u}}
  - {name: edge-reader, context: {cluster: edge, user: u}}
current-context: home
`), 0o600))
	f, err := FromKubeconfig(context.Background(), &clientcmd.ClientConfigLoadingRules{ExplicitPath: p}, home)
	require.NoError(t, err)
	f.ProbeTimeout = time.Second
	sts := f.Status()
	require.Len(t, sts, 1, "the home server is skipped, the edge one taken once")
	assert.Equal(t, []string{"edge-admin", edge}, []string{sts[0].Name, sts[0].Server})
	_, name, err := f.Resolve(context.Background(), edge, "")
	assert.Equal(t, "edge-admin", name)
	assert.ErrorContains(t, err, "cluster edge-admin unreachable")
	_, _, err = f.Resolve(context.Background(), "https://far.example.com", "")
	assert.ErrorContains(t, err, "add a context for it to your kubeconfig")
}

// apiServer answers the auditor's probe (a SelfSubjectReview) after delay; it counts the probes
// asked and those answered.
func apiServer(t *testing.T, delay time.Duration) (srv *httptest.Server, asked, answered *atomic.Int64) {
	asked, answered = &atomic.Int64{}, &atomic.Int64{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/selfsubjectreviews" {
			http.NotFound(w, r)
			return
		}
		asked.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview","status":{"userInfo":{"username":"auditor"}}}`))
		answered.Add(1)
	}))
	t.Cleanup(srv.Close)
	return srv, asked, answered
}

// Watch probes only the clusters Probes picks (a replica, the clusters it audits), several at
// once: a cluster slow to answer does not hold up the probes of the others in the round.
func TestWatchProbesThePickedClustersAtOnce(t *testing.T) {
	slow, slowAsked, slowAnswered := apiServer(t, 2*time.Second)
	mine, mineAsked, _ := apiServer(t, 0)
	other, otherAsked, _ := apiServer(t, 0)
	f := newFleet(context.Background())
	f.ProbeTimeout = 5 * time.Second
	// The slow cluster first: probed one after the other, mine would wait for its answer.
	f.add(Cluster{Name: "slow", Server: slow.URL}, &rest.Config{Host: slow.URL})
	f.add(Cluster{Name: "mine", Server: mine.URL}, &rest.Config{Host: mine.URL})
	f.add(Cluster{Name: "other", Server: other.URL}, &rest.Config{Host: other.URL})
	f.Probes = func(name string) bool { return name != "other" }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Watch(ctx, 10*time.Millisecond, func(Status) {}) }()

	require.Eventually(t, func() bool { return mineAsked.Load() == 1 && slowAsked.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the picked clusters were never probed")
	assert.Zero(t, slowAnswered.Load(), "mine was probed only once the slow cluster answered")
	require.Eventually(t, func() bool { return slowAsked.Load() >= 2 && mineAsked.Load() >= 2 }, 10*time.Second, 10*time.Millisecond, "no second round")
	cancel()
	<-done
	assert.Zero(t, otherAsked.Load(), "a cluster Probes did not pick was probed")
}
