package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
