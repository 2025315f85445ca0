package shard

import (
	"context"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
