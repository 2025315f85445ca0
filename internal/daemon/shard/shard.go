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
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// MemberLease is the name of identity's membership Lease in group: the identity made a DNS
// name (lower case, other characters as '-'), with a hash of it when that changed it.
func MemberLease(group, identity string) string {
	name := strings.ToLower(identity)
	name = regexp.MustCompile(`[^a-z0-9.-]+`).ReplaceAllString(name, "-")
	if name != identity {
		name = fmt.Sprintf("%s-%08x", strings.Trim(name, "-."), uint32(weight(identity, "")))
	}
	return trimName(group + "-member-" + name)
}

// ShardLease is the name of shard's Lease in group.
func ShardLease(group, shard string) string { return trimName(group + "-shard-" + shard) }

func trimName(s string) string {
	if len(s) > 253 {
		s = s[:253]
	}
	return strings.TrimRight(s, "-.")
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

// tick renews the membership, lists the members and moves the shards.
func (s *Sharder) tick(ctx context.Context) {
	now := time.Now()
	if s.lapsed(now) {
		// This replica's membership has not been renewed for most of a lease: the others may
		// take its shards soon. It stops working on them first (it cannot clear their Leases).
		for _, shard := range s.Held() {
			s.cfg.Log.Warn("membership not renewed: letting go", "shard", shard)
			s.release(shard, false)
		}
	}
	lctx, cancel := s.callContext(ctx)
	leases, err := s.cfg.Leases.List(lctx, metav1.ListOptions{LabelSelector: GroupLabel + "=" + s.cfg.Group})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("list members", "err", err)
		}
		s.checkRenewals(time.Now())
		return
	}
	holders := map[string]*coordinationv1.Lease{}
	var stale []string // membership Leases of replicas long gone (killed: nothing deleted them)
	s.mu.Lock()
	alive := []string{}
	seen := map[string]observed{}
	for i := range leases.Items {
		l := &leases.Items[i]
		renew := renewTime(l)
		o, ok := s.seen[l.Name]
		if !ok || !o.renew.Equal(renew) {
			o = observed{renew: renew, at: now}
		}
		seen[l.Name] = o
		holder := ptrString(l.Spec.HolderIdentity)
		switch l.Labels[RoleLabel] {
		case "member":
			if holder != "" && holder != s.cfg.Identity && now.Sub(o.at) < s.cfg.LeaseDuration {
				alive = append(alive, holder)
			}
			if holder != s.cfg.Identity && now.Sub(o.at) > staleAfter*s.cfg.LeaseDuration {
				stale = append(stale, l.Name)
			}
		case "shard":
			holders[l.Labels[shardLabel]] = l
		}
	}
	// This replica is a member while its own renewals get through.
	if !s.lapsedLocked(now) {
		alive = append(alive, s.cfg.Identity)
	}
	slices.Sort(alive)
	alive = slices.Compact(alive)
	if !slices.Equal(alive, s.members) {
		s.cfg.Log.Info("shard members changed", "members", alive)
	}
	s.seen, s.members = seen, alive
	s.mu.Unlock()
	for _, name := range stale {
		dctx, cancel := s.callContext(ctx)
		err := s.cfg.Leases.Delete(dctx, name, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			s.cfg.Log.Warn("delete a stale membership", "lease", name, "err", err)
		} else if err == nil {
			s.cfg.Log.Info("deleted the membership of a replica long gone", "lease", name)
		}
	}
	for _, shard := range s.cfg.Shards {
		if ctx.Err() != nil {
			return
		}
		s.move(ctx, shard, Owner(alive, shard), holders[shard], alive)
	}
	s.checkRenewals(time.Now())
}

// staleAfter is how many lease durations a membership goes unrenewed before a live replica
// deletes its Lease: a killed replica's (a pod of a Deployment never comes back under its name).
const staleAfter = 10

// shardLabel names the shard on its Lease.
const shardLabel = "auditor.llm-gitops.io/shard"

// move makes this replica hold shard when it owns it (once the last holder let go or died),
// renews it while it does, and lets go of it when another replica owns it.
func (s *Sharder) move(ctx context.Context, shard, owner string, lease *coordinationv1.Lease, alive []string) {
	s.mu.Lock()
	h := s.held[shard]
	s.mu.Unlock()
	if h != nil {
		if owner != s.cfg.Identity {
			s.cfg.Log.Info("shard moves to another replica", "shard", shard, "owner", owner)
			s.release(shard, true)
			return
		}
		sent := time.Now()
		if err := s.renewShard(ctx, shard); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsNotFound(err) { // another replica holds it now
				s.cfg.Log.Warn("shard taken by another replica", "shard", shard, "err", err)
				s.release(shard, false)
				return
			}
			if ctx.Err() == nil {
				s.cfg.Log.Warn("renew shard", "shard", shard, "err", err)
			}
			return
		}
		s.mu.Lock()
		h.renewed = sent
		s.mu.Unlock()
		return
	}
	if owner != s.cfg.Identity {
		return
	}
	holder := ""
	if lease != nil {
		holder = ptrString(lease.Spec.HolderIdentity)
	}
	// The last holder is this replica's former self (restarted), gone (released), or a member
	// whose membership expired: it stopped working on the shard before its membership expired,
	// since its shard renewals fail first.
	if holder != "" && holder != s.cfg.Identity && slices.Contains(alive, holder) {
		return // it lets go of it at its next tick
	}
	acquiring := time.Now()
	actx, cancel := s.callContext(ctx)
	err := s.acquire(actx, shard, lease, acquiring)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Info("acquire shard", "shard", shard, "err", err)
		}
		return
	}
	hctx, hcancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.held[shard] = &holding{cancel: hcancel, renewed: acquiring}
	s.moves++
	s.mu.Unlock()
	s.cfg.Log.Info("acquired shard", "shard", shard, "from", holder)
	go s.cfg.Acquired(hctx, shard)
}

// checkRenewals lets go of the shards whose renewals failed for two thirds of a lease
// duration: another replica may take them once the membership expires.
func (s *Sharder) checkRenewals(now time.Time) {
	s.mu.Lock()
	var lost []string
	for shard, h := range s.held {
		if now.Sub(h.renewed) > s.cfg.LeaseDuration*2/3 {
			lost = append(lost, shard)
		}
	}
	s.mu.Unlock()
	for _, shard := range lost {
		s.cfg.Log.Warn("shard renewals failed: letting go", "shard", shard)
		s.release(shard, false)
	}
}

// release stops this replica's work on shard (Release), then, when clear, empties the Lease's
// holder so the next owner takes it without waiting for it to expire.
func (s *Sharder) release(shard string, clear bool) {
	s.mu.Lock()
	h := s.held[shard]
	delete(s.held, shard)
	if h != nil {
		s.moves++
	}
	s.mu.Unlock()
	if h == nil {
		return
	}
	h.cancel() // before Release: an Acquired still starting sees its end
	s.cfg.Release(shard)
	if !clear {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LeaseDuration)
	defer cancel()
	if err := s.patchShard(ctx, shard, []map[string]any{{"op": "replace", "path": "/spec/holderIdentity", "value": ""}}); err != nil {
		s.cfg.Log.Warn("clear shard holder", "shard", shard, "err", err)
	}
}

// stop releases every shard and deletes the membership Lease.
func (s *Sharder) stop() {
	for _, shard := range s.Held() {
		s.release(shard, true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LeaseDuration)
	defer cancel()
	err := s.cfg.Leases.Delete(ctx, MemberLease(s.cfg.Group, s.cfg.Identity), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.cfg.Log.Warn("delete membership", "err", err)
	}
}

// renewMember creates or renews this replica's membership Lease.
func (s *Sharder) renewMember(ctx context.Context, now time.Time) error {
	name := MemberLease(s.cfg.Group, s.cfg.Identity)
	rt := metav1.NewMicroTime(now)
	l, err := s.cfg.Leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = s.cfg.Leases.Create(ctx, s.newLease(name, "member", "", now), metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &rt
	l.Spec.HolderIdentity = &s.cfg.Identity
	_, err = s.cfg.Leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// acquire makes this replica the holder of shard's Lease: created, or updated at the
// resourceVersion it was read at, so that of two replicas racing for it one wins.
func (s *Sharder) acquire(ctx context.Context, shard string, l *coordinationv1.Lease, now time.Time) error {
	name := ShardLease(s.cfg.Group, shard)
	if l == nil {
		_, err := s.cfg.Leases.Create(ctx, s.newLease(name, "shard", shard, now), metav1.CreateOptions{})
		return err
	}
	l = l.DeepCopy()
	rt := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = &s.cfg.Identity, &rt, &rt
	n := int32(1)
	if l.Spec.LeaseTransitions != nil {
		n = *l.Spec.LeaseTransitions + 1
	}
	l.Spec.LeaseTransitions = &n
	_, err := s.cfg.Leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// renewShard renews shard's Lease while this replica holds it: a JSON patch that tests the
// holder, so it neither lands for a replica that lost the shard nor conflicts with writes of
// annotations (the daemon's delivery records) on the same Lease.
func (s *Sharder) renewShard(ctx context.Context, shard string) error {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return s.patchShard(ctx, shard, []map[string]any{
		{"op": "replace", "path": "/spec/renewTime", "value": metav1.NewMicroTime(time.Now())},
	})
}

// patchShard applies ops to shard's Lease after a test that this replica holds it.
func (s *Sharder) patchShard(ctx context.Context, shard string, ops []map[string]any) error {
	ops = append([]map[string]any{{"op": "test", "path": "/spec/holderIdentity", "value": s.cfg.Identity}}, ops...)
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = s.cfg.Leases.Patch(ctx, ShardLease(s.cfg.Group, shard), types.JSONPatchType, data, metav1.PatchOptions{})
	return err
}

func (s *Sharder) newLease(name, role, shard string, now time.Time) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(now)
	secs := int32(s.cfg.LeaseDuration / time.Second)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{GroupLabel: s.cfg.Group, RoleLabel: role}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &s.cfg.Identity, LeaseDurationSeconds: &secs, AcquireTime: &rt,
			RenewTime: &rt},
	}
	if shard != "" {
		l.Labels[shardLabel] = shard
	}
	return l
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	return l.CreationTimestamp.Time
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
