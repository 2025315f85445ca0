package daemon

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
)

// followArgoCD watches the Events argocd-server records on the Applications of Argo CD's
// namespace ("alice patched resource apps/Deployment 'web'") and keeps its users' actions in the
// people store: a write argocd-server's ServiceAccount made then names the Argo CD user who asked
// for it (auditlog.Store.ThroughArgoCD). It needs get, list and watch on Events in that namespace
// only; without them it warns once and the ServiceAccount stays the person.
func (d *Daemon) followArgoCD(ctx context.Context) error {
	select {
	case <-d.connected: // the layout has decided Argo CD's namespace
	case <-ctx.Done():
		return nil
	}
	ns := d.appNamespace()
	d.people.SetArgoCDServer(auditlog.ArgoCDServerUser(ns))
	cs, err := kubernetes.NewForConfig(d.rest)
	if err != nil {
		return fmt.Errorf("argo cd records: %w", err)
	}
	lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "events", ns, func(o *metav1.ListOptions) {
		o.FieldSelector = auditlog.ArgoCDRecordSelector
	})
	inf := cache.NewSharedIndexInformer(lw, &corev1.Event{}, 0, cache.Indexers{})
	var warned sync.Once
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		warned.Do(func() {
			d.log.Warn("Argo CD's records of its users' writes not read: writes through argocd-server name its ServiceAccount",
				"namespace", ns, "err", err)
		})
	})
	keep := func(obj any) {
		if ev, ok := obj.(*corev1.Event); ok {
			if a, ok := auditlog.ParseArgoCDEvent(ev); ok {
				d.people.AddArgoCD(a)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: keep}); err != nil {
		return fmt.Errorf("argo cd records: %w", err)
	}
	inf.Run(ctx.Done())
	return nil
}
