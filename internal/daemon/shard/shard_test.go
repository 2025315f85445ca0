package shard

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{SkipCRDs: true}, &cluster))
}

func TestOwnerMovesOnlyTheShardsOfTheMemberThatCameOrWent(t *testing.T) {
	shards := make([]string, 3000)
	for i := range shards {
		shards[i] = fmt.Sprintf("cluster-%d", i)
	}
	three := []string{"auditor-0", "auditor-1", "auditor-2"}
	four := append(slices.Clone(three), "auditor-3")
	perMember := map[string]int{}
	moved := 0
	for _, s := range shards {
		before, after := Owner(three, s), Owner(four, s)
		perMember[before]++
		if before != after {
			moved++
			assert.Equal(t, "auditor-3", after, "a join moves shards only to the member that joined")
		}
		// A member leaving moves only its own shards.
		if gone := Owner(three[1:], s); before != "auditor-0" {
			assert.Equal(t, before, gone, "shard %s moved though its owner stayed", s)
		}
		assert.Equal(t, before, Owner([]string{"auditor-2", "auditor-0", "auditor-1"}, s), "the order of members does not matter")
	}
	assert.InDelta(t, 0.25, float64(moved)/float64(len(shards)), 0.03, "about 1/4 of the shards move to a fourth member")
	for m, n := range perMember {
		assert.InDelta(t, 1000, n, 100, "member %s owns about a third", m)
	}
	assert.Empty(t, Owner(nil, "x"))
}

func TestMemberLeaseIsADNSName(t *testing.T) {
	assert.Equal(t, "auditor-member-auditor-0", MemberLease("auditor", "auditor-0"))
	name := MemberLease("auditor", "Host_1-42")
	assert.Regexp(t, `^auditor-member-host-1-42-[0-9a-f]{8}$`, name)
	assert.NotEqual(t, name, MemberLease("auditor", "host_1-42"), "identities that differ keep different Leases")
}

// work is the oracle of exclusivity: which replica works on each shard, as the callbacks say.
type work struct {
	t       *testing.T
	mu      sync.Mutex
	holder  map[string]string
	doubled []string
}

func (w *work) acquired(id string) func(context.Context, string) {
	return func(_ context.Context, shard string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if h := w.holder[shard]; h != "" && h != id {
			w.doubled = append(w.doubled, fmt.Sprintf("%s taken by %s while %s works on it", shard, id, h))
		}
		w.holder[shard] = id
	}
}

func (w *work) release(id string) func(string) {
	return func(shard string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.holder[shard] == id {
			delete(w.holder, shard)
		}
	}
}

// died ends the work of a killed replica: a dead process works on nothing.
func (w *work) died(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for sh, h := range w.holder {
		if h == id {
			delete(w.holder, sh)
		}
	}
}

func (w *work) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for k, v := range w.holder {
		out[k] = v
	}
	return out
}

// replica is one Sharder running in the test.
type replica struct {
	s      *Sharder
	cancel context.CancelFunc
	done   chan struct{}
}

func TestReplicasShareShardsHandOverOnJoinAndTakeOverAfterAKill(t *testing.T) {
	testcluster.Need(t)
	ns := cluster.Namespace(t)
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	shards := []string{"in-cluster", "edge", "train", "eu-1", "eu-2", "us-1", "us-2", "ap-1", "ap-2"}
	w := &work{t: t, holder: map[string]string{}}
	const lease = 3 * time.Second
	start := func(id string, kill bool) *replica {
		s, err := New(Config{Leases: cs.CoordinationV1().Leases(ns), Group: "auditor", Identity: id, Shards: shards,
			LeaseDuration: lease, RetryPeriod: 200 * time.Millisecond, Acquired: w.acquired(id), Release: w.release(id)})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{s: s, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			if kill {
				s.loop(ctx) // a kill: nothing is released, nothing deleted
				return
			}
			s.Run(ctx)
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	// settled waits until every shard is worked on by the owner the members compute.
	settled := func(members []string, within time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		require.Eventually(t, func() bool {
			got := w.snapshot()
			for _, sh := range shards {
				if got[sh] != Owner(members, sh) {
					return false
				}
			}
			return true
		}, within, 50*time.Millisecond, "shards not settled on %v: %v", members, w.snapshot())
		return time.Since(begin)
	}

	a, b := start("auditor-a", false), start("auditor-b", true)
	c := start("auditor-c", false)
	settled([]string{"auditor-a", "auditor-b", "auditor-c"}, 30*time.Second)
	for _, r := range []*replica{a, b, c} {
		assert.NotEmpty(t, r.s.Held(), "each of three replicas holds shards of nine")
	}

	// A fourth joins: only the shards it now owns move, each after its last holder let go.
	before := w.snapshot()
	d := start("auditor-d", false)
	four := []string{"auditor-a", "auditor-b", "auditor-c", "auditor-d"}
	settled(four, 30*time.Second)
	after := w.snapshot()
	for _, sh := range shards {
		if before[sh] != after[sh] {
			assert.Equal(t, "auditor-d", after[sh], "shard %s moved between replicas that stayed", sh)
		}
	}
	assert.Equal(t, d.s.Held(), ownedBy(shards, four, "auditor-d"))

	// b is killed: it releases nothing. Its shards are taken once its membership expires.
	bHeld := b.s.Held()
	b.cancel()
	<-b.done
	w.died("auditor-b")
	killedAt := time.Now()
	three := []string{"auditor-a", "auditor-c", "auditor-d"}
	took := settled(three, 30*time.Second)
	t.Logf("b held %v; taken over %s after the kill (lease %s)", bHeld, time.Since(killedAt).Round(10*time.Millisecond), lease)
	assert.Less(t, took, 2*lease+time.Second, "a dead replica's shards are taken within its lease and one more")

	// The killed replica's membership Lease is deleted once it has gone unrenewed for long.
	require.Eventually(t, func() bool {
		_, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), MemberLease("auditor", "auditor-b"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, staleAfter*lease+10*time.Second, 200*time.Millisecond, "the killed replica's membership Lease stays")

	// A graceful stop hands over at once, without waiting for the lease.
	c.cancel()
	<-c.done
	took = settled([]string{"auditor-a", "auditor-d"}, 30*time.Second)
	assert.Less(t, took, lease, "a stopped replica's shards are taken before its lease would expire")
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.doubled, "no shard is worked on by two replicas at once")
}

func ownedBy(shards, members []string, id string) []string {
	var out []string
	for _, sh := range shards {
		if Owner(members, sh) == id {
			out = append(out, sh)
		}
	}
	slices.Sort(out)
	return out
}
