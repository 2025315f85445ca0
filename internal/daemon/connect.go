package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// connect opens the repository and the cluster, retrying while either is unreachable.
func (d *Daemon) connect(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := d.tryConnect(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, errRefused) {
			return err // the config and the repository disagree: no retry mends that
		}
		d.log.Error("connect", "err", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 30*time.Second)):
		}
	}
}

func (d *Daemon) tryConnect(ctx context.Context) error {
	if err := d.git.Open(ctx); err != nil {
		return err
	}
	if err := d.startLayout(); err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	// The cache's informers live as long as its context: a connect that fails past this point
	// stops them instead of leaving them running beside the next attempt's.
	cctx, stop := context.WithCancel(ctx)
	c, err := live.New(cctx, d.rest)
	if err != nil {
		stop()
		return err
	}
	// Applications are read only in Argo CD's namespaces, where Argo CD reconciles them (its
	// Role there is all the auditor needs for them); scoped, namespaced kinds (Secrets included)
	// only where the envs live.
	c.SetInformerHook(d.hooks.starting) // every informer watched for changes from its start
	c.ScopeTo(d.cfg.WatchNamespaces, map[schema.GroupVersionKind][]string{
		argocd.ApplicationGVK: append([]string{d.appNamespace()}, d.cfg.AppNamespaces...)})
	// Applications change when Argo CD syncs: a new synced revision is a reason to re-audit.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Watch(wctx, nil, []schema.GroupVersionKind{argocd.ApplicationGVK}); err != nil {
		stop()
		return err
	}
	d.conn.set(c, stop)
	return nil
}

// errRefused marks an error of connect that no retry mends: the daemon does not start.
var errRefused = errors.New("refused to start")
