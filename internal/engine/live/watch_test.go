package live

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{SkipCRDs: true}, &cluster))
}

// TestWatchOutlivesTheRequestTimeout: the timeout that bounds ordinary requests does not cut
// the informers' watches. Three timeouts later a write still arrives through the first watch.
func TestWatchOutlivesTheRequestTimeout(t *testing.T) {
	testcluster.Need(t)
	old := RequestTimeout
	RequestTimeout = time.Second
	t.Cleanup(func() { RequestTimeout = old })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := cluster.Namespace(t)
	c, err := New(ctx, cluster.Config)
	require.NoError(t, err)
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	require.NoError(t, c.Watch(ctx, []schema.GroupVersionKind{cm}, nil))
	starts := c.WatchStarts()
	require.Equal(t, int64(1), starts, "one watch for one kind")

	time.Sleep(3 * RequestTimeout)
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := c.Get(cm, ns, "late"); return ok }, 10*time.Second, 50*time.Millisecond,
		"the write did not reach the cache")
	assert.Equal(t, starts, c.WatchStarts(), "the watch was restarted: something cut it")
}

// TestWatchNamesKindsThatDoNotSync: a kind the credentials may not list never syncs; Watch gives
// up when its context ends and names that kind, instead of hanging.
func TestWatchNamesKindsThatDoNotSync(t *testing.T) {
	testcluster.Need(t)
	reader := rest.CopyConfig(cluster.Config)
	reader.BearerToken = testcluster.ReaderToken // no RBAC: every list is forbidden
	c, err := New(context.Background(), reader)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = c.Watch(ctx, []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}, nil)
	var ns *NotSyncedError
	require.ErrorAs(t, err, &ns)
	assert.Equal(t, []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}, ns.Kinds)
	assert.Contains(t, err.Error(), "ConfigMap")
}

// TestSecretsWatchedForMetadataUntilDeclared: a kind watched only to find hand-made objects
// (optional) holds Secrets' metadata, never their data; once an audit needs Secrets (required)
// the informers are replaced by full ones and the data is there.
func TestSecretsWatchedForMetadataUntilDeclared(t *testing.T) {
	testcluster.Need(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := cluster.Namespace(t)
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c, err := New(ctx, cluster.Config)
	require.NoError(t, err)
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

	require.NoError(t, c.Watch(ctx, nil, []schema.GroupVersionKind{secret}))
	u, ok := c.Get(secret, ns, "db")
	require.True(t, ok)
	assert.Equal(t, "Secret", u.GetKind())
	assert.NotEmpty(t, u.GetManagedFields(), "metadata is there: managedFields name the creator")
	assert.NotContains(t, u.Object, "data", "a metadata-only watch holds no values")
	require.Len(t, c.List(secret, ns), 1)

	require.NoError(t, c.Watch(ctx, []schema.GroupVersionKind{secret}, nil))
	u, ok = c.Get(secret, ns, "db")
	require.True(t, ok)
	assert.Contains(t, u.Object, "data", "declared in Git: compared by value")
}

// TestMissingKindAsksDiscoveryOncePerTTL: a kind the cluster does not serve is looked up again
// in discovery at most once per MissingKindTTL, not at every audit.
func TestMissingKindAsksDiscoveryOncePerTTL(t *testing.T) {
	testcluster.Need(t)
	c, err := New(context.Background(), cluster.Config)
	require.NoError(t, err)
	gvk := schema.GroupVersionKind{Group: "example.invalid", Version: "v1", Kind: "Nothing"}
	for range 3 {
		_, err := c.Mapping(gvk)
		var kerr *KindError
		require.ErrorAs(t, err, &kerr)
	}
	assert.Equal(t, int64(1), c.DiscoveryResets())
	old := MissingKindTTL
	MissingKindTTL = 0
	t.Cleanup(func() { MissingKindTTL = old })
	_, err = c.Mapping(gvk)
	require.Error(t, err)
	assert.Equal(t, int64(2), c.DiscoveryResets(), "asked again once the TTL passed")
}
