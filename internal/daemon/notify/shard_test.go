package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// onCluster is the test Deployment on cluster (a member; "" for Argo CD's own).
func onCluster(cluster string, f drift.Field) drift.Object {
	o := notifytest.Deployment(f)
	o.Cluster = cluster
	return o
}

// TestFolderNeverFoldsTwoClustersIntoOneMessage: replicas that share the work by cluster each
// post whole messages of their own clusters, so one env's drift on two clusters within one
// window is two messages.
func TestFolderNeverFoldsTwoClustersIntoOneMessage(t *testing.T) {
	got := make(chan []message.Message, 10)
	f := NewFolder(50*time.Millisecond, Options{}, func(m []message.Message) { got <- m })
	defer f.Close()
	rep := notifytest.Report("prod", notifytest.Rev, onCluster("", notifytest.LogLevel), onCluster("edge", notifytest.LogLevel),
		onCluster("edge", notifytest.Replicas))
	f.Add("prod", Items(rep), nil)
	byCluster := map[string][]string{}
	for range 2 {
		select {
		case ms := <-got:
			require.Len(t, ms, 1)
			c := ClusterOfKey(ms[0].Keys[0])
			for _, k := range ms[0].Keys {
				assert.Equal(t, c, ClusterOfKey(k), "one message, one cluster")
			}
			byCluster[c] = ms[0].Keys
		case <-time.After(2 * time.Second):
			t.Fatal("folder did not emit")
		}
	}
	assert.Len(t, byCluster[""], 1)
	assert.Len(t, byCluster["edge"], 2, "the edge cluster's two drifts are one digest")
}

// TestTrackerReplacesAndForgetsOneShard: a replica taking a cluster over seeds that cluster's
// items from the shard's record and keeps the others; one giving it up forgets its items
// without announcing them resolved.
func TestTrackerReplacesAndForgetsOneShard(t *testing.T) {
	edge := func(it Item) bool { return it.Object.Cluster == "edge" }
	tr := NewTracker()
	_, _, err := tr.Observe(notifytest.Report("prod", notifytest.Rev, onCluster("", notifytest.LogLevel), onCluster("edge", notifytest.LogLevel)))
	require.NoError(t, err)
	hubKey := ItemKey("prod", onCluster("", notifytest.LogLevel), notifytest.LogLevel.Path, notifytest.LogLevel.Manager, notifytest.Rev)
	seeded := ItemKey("prod", onCluster("edge", notifytest.Replicas), notifytest.Replicas.Path, notifytest.Replicas.Manager, notifytest.Rev)
	tr.Replace(edge, []string{seeded, hubKey}) // the hub's key is not the edge shard's: ignored
	assert.Equal(t, []string{seeded, hubKey}, sortedKeys(tr.Current("prod")))

	// The edge cluster's replicas drift was announced by the last holder: not announced again.
	added, resolved, err := tr.Observe(notifytest.Report("prod", notifytest.Rev, onCluster("", notifytest.LogLevel), onCluster("edge", notifytest.Replicas)))
	require.NoError(t, err)
	assert.Empty(t, added)
	assert.Empty(t, resolved)

	tr.Forget(edge)
	assert.Equal(t, []string{hubKey}, keysOf(tr.Current("prod")))
}

func sortedKeys(items []Item) []string {
	sortItems(items)
	return keysOf(items)
}

func TestClusterOfKey(t *testing.T) {
	for key, want := range map[string]string{
		"prod|apps/v1/Deployment/llm/rag|.spec.replicas|kubectl-scale|r1":       "",
		"prod|@edge-1/apps/v1/Deployment/llm/rag|.spec.replicas|kubectl-scale|": "edge-1",
		"alert/peak/prod":       "",
		"prod|@edge|x|y|z":      "edge",
		"prod|v1/ConfigMap/-/x": "",
	} {
		assert.Equal(t, want, ClusterOfKey(key), key)
	}
}

// TestObserveInLeavesTheOtherShardsItemsStanding: a report that speaks only for the hub (the
// edge cluster was taken over after its audit began) neither resolves nor announces the edge's
// drift, and keeps it tracked.
func TestObserveInLeavesTheOtherShardsItemsStanding(t *testing.T) {
	hub := func(it Item) bool { return it.Object.Cluster == "" }
	tr := NewTracker()
	_, _, err := tr.Observe(notifytest.Report("prod", notifytest.Rev, onCluster("", notifytest.LogLevel), onCluster("edge", notifytest.LogLevel)))
	require.NoError(t, err)
	added, resolved, err := tr.ObserveIn(notifytest.Report("prod", notifytest.Rev, onCluster("", notifytest.Replicas)), hub)
	require.NoError(t, err)
	assert.Equal(t, []string{ItemKey("prod", onCluster("", notifytest.Replicas), notifytest.Replicas.Path, notifytest.Replicas.Manager, notifytest.Rev)}, keysOf(added))
	assert.Equal(t, []string{ItemKey("prod", onCluster("", notifytest.LogLevel), notifytest.LogLevel.Path, notifytest.LogLevel.Manager, notifytest.Rev)}, keysOf(resolved),
		"only the hub's drift that went away is resolved")
	var clusters []string
	for _, it := range tr.Current("prod") {
		clusters = append(clusters, it.Object.Cluster+":"+it.Object.Fields[0].Path)
	}
	assert.ElementsMatch(t, []string{":" + notifytest.Replicas.Path, "edge:" + notifytest.LogLevel.Path}, clusters)
}
