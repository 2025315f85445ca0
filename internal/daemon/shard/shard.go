// Package shard spreads shards of work (the daemon's: clusters) over the replicas of a daemon.
//
// Each replica keeps a membership Lease. Every replica lists the others' and computes the same
// owner for each shard by rendezvous hashing over the live members: when a replica joins, only
// the shards it now wins move (about 1/N); when one dies, only its shards move. The owner holds
// the shard's own Lease while it works on it, so two replicas never work on one shard at once:
// a replica that loses a shard stops its work and clears the Lease's holder before the next owner
// takes it, and the Lease of a replica that died is taken once its membership has expired.
package shard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Labels of the Leases a Sharder writes: GroupLabel names the group (Config.Group), RoleLabel
// says whether the Lease is a member's or a shard's.
const (
	GroupLabel = "auditor.llm-gitops.io/shard-group"
	RoleLabel  = "auditor.llm-gitops.io/shard-role"
)

// Owner returns the member that owns shard among members, by rendezvous (highest random
// weight) hashing: the member with the highest hash of (member, shard). It is "" without
// members. Every replica computes the same owner from the same member set.
func Owner(members []string, shard string) string {
	best, bestW := "", uint64(0)
	for _, m := range members {
		if w := weight(m, shard); best == "" || w > bestW || w == bestW && m < best {
			best, bestW = m, w
		}
	}
	return best
}

// weight is the 64-bit FNV-1a hash of member and shard, finished by splitmix64's mixer so that
// names differing in one letter spread over the whole range.
func weight(member, shard string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, member)
	_, _ = h.Write([]byte{0})
	_, _ = io.WriteString(h, shard)
	x := binary.BigEndian.Uint64(h.Sum(nil))
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Config configures a Sharder. Zero durations take the defaults in brackets.
type Config struct {
	// Leases is where the Leases live (a namespace's).
	Leases coordclient.LeaseInterface
	// Group names the Leases: <Group>-member-<identity> and <Group>-shard-<shard>.
	Group string
	// Identity is this replica's name; it must be unique among the replicas.
	Identity string
	// Shards are the shards to spread; names must be DNS labels.
	Shards []string
	// LeaseDuration is how long a member or a holder counts as alive after its last renewal
	// [15s]; RetryPeriod how often Leases are renewed and the members listed [2s].
	LeaseDuration, RetryPeriod time.Duration
	// Acquired is called in its own goroutine when this replica starts to hold shard; ctx ends
	// when it stops holding it, just before Release is called.
	Acquired func(ctx context.Context, shard string)
	// Release is called before this replica lets go of a shard it holds: the shard moved to
	// another replica, its renewals failed, or the Sharder stops. It returns once this
	// replica's work on the shard has stopped; only then is the Lease cleared for the next owner.
	Release func(shard string)
	// Log receives membership and ownership changes [discard].
	Log *slog.Logger
}

// Sharder keeps this replica's membership and holds the shards it owns. Run it; the other
// methods are safe for concurrent use.
type Sharder struct {
	cfg Config

	mu      sync.Mutex
	seen    map[string]observed // lease name -> its last renewal as this replica saw it
	members []string            // the live members, sorted
	held    map[string]*holding
	renewed time.Time // this replica's last successful membership renewal
	moves   int       // shards acquired or released
}

type observed struct {
	renew time.Time // the renewTime the Lease said
	at    time.Time // when this replica first saw that renewTime (its own clock)
}

type holding struct {
	cancel  context.CancelFunc
	renewed time.Time
}

// New checks cfg and returns a Sharder.
func New(cfg Config) (*Sharder, error) {
	if cfg.Leases == nil || cfg.Group == "" || cfg.Identity == "" {
		return nil, errors.New("shard: Leases, Group and Identity are required")
	}
	for _, s := range cfg.Shards {
		if !dnsLabel.MatchString(s) {
			return nil, fmt.Errorf("shard: shard name %q is not a DNS label", s)
		}
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Acquired == nil {
		cfg.Acquired = func(context.Context, string) {}
	}
	if cfg.Release == nil {
		cfg.Release = func(string) {}
	}
	return &Sharder{cfg: cfg, seen: map[string]observed{}, held: map[string]*holding{}}, nil
}

// Members returns the live members as this replica last saw them, sorted.
func (s *Sharder) Members() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.members)
}

// Held returns the shards this replica holds, sorted.
func (s *Sharder) Held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.held))
	for sh := range s.held {
		out = append(out, sh)
	}
	slices.Sort(out)
	return out
}

// Moves returns how many times this replica acquired or released a shard.
func (s *Sharder) Moves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moves
}

// Run keeps the membership and the shards until ctx ends; then it releases every shard it
// holds and deletes its membership Lease, so that the others take its shards at once.
func (s *Sharder) Run(ctx context.Context) {
	s.loop(ctx)
	s.stop()
}

// loop renews the membership and ticks until ctx ends. The membership is renewed on its own:
// a tick that waits for a shard's work to stop does not let it lapse.
func (s *Sharder) loop(ctx context.Context) {
	s.renewMembership(ctx) // a member before the first tick
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { every(ctx, s.cfg.RetryPeriod, s.renewMembership) })
	every(ctx, s.cfg.RetryPeriod, s.tick)
}

// every runs f at once, then every period until ctx ends.
func every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewMembership renews this replica's membership Lease and records when it last got through.
func (s *Sharder) renewMembership(ctx context.Context) {
	now := time.Now()
	cctx, cancel := s.callContext(ctx)
	defer cancel()
	if err := s.renewMember(cctx, now); err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("renew membership", "err", err)
		}
		return
	}
	s.mu.Lock()
	s.renewed = now
	s.mu.Unlock()
}

// lapsed says whether this replica's membership went unrenewed for two thirds of a lease: the
// others will count it gone before long.
func (s *Sharder) lapsed(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lapsedLocked(now)
}

func (s *Sharder) lapsedLocked(now time.Time) bool {
	return now.Sub(s.renewed) > s.cfg.LeaseDuration*2/3
}

// callContext bounds one call to the API server to a third of a lease: a call that hangs (a
// network that drops packets) must not hold the loop past the point others take over.
func (s *Sharder) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.LeaseDuration/3)
}

// Fresh says whether this replica holds shard and renewed its Lease within half a lease: work
// that must not overlap another replica's (a post to chat) goes on only while it is.
func (s *Sharder) Fresh(shard string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[shard]
	return h != nil && time.Since(h.renewed) < s.cfg.LeaseDuration/2
}
