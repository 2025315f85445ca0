package daemon

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// campaign runs leader election on a Lease until ctx ends; leadership lost is campaigned for again.
func (d *Daemon) campaign(ctx context.Context) {
	le := d.cfg.LeaderElection
	id := le.Identity
	if id == "" {
		id = os.Getenv("POD_NAME")
	}
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	ns, name := le.Namespace, le.Name
	if ns == "" {
		ns = "llm-system"
	}
	if name == "" {
		name = "auditor"
	}
	cs, err := kubernetes.NewForConfig(d.rest)
	if err != nil {
		d.log.Error("leader election", "err", err)
		return
	}
	var decided sync.Once
	for ctx.Err() == nil {
		lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Client: cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: le.LeaseDuration.or(15 * time.Second), RenewDeadline: le.RenewDeadline.or(10 * time.Second),
			RetryPeriod: le.RetryPeriod.or(2 * time.Second),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					d.log.Info("became leader: this replica posts reports", "identity", id)
					d.setLeader(true)
				},
				OnStoppedLeading: func() {
					d.log.Info("lost leadership", "identity", id)
					d.setLeader(false)
				},
				OnNewLeader: func(current string) {
					if current == id {
						d.setLeader(true)
					}
					decided.Do(func() { close(d.decided) })
				},
			},
		})
	}
}
