package audit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// declaresNoApplications says whether Argo CD's own comparison of app, at the revision it synced
// and of the source it renders, lists resources and no Application or ApplicationSet among them:
// its render adds no member to the group. Without such a comparison (not reconciled yet, a
// comparison error, another revision or source compared, several sources) it may, and is rendered.
func declaresNoApplications(app *argocd.App) bool {
	if app == nil || app.Status == nil || app.Status.Error != "" || len(app.Sources) > 0 || len(app.Status.Resources) == 0 ||
		app.Status.Revision == "" || app.Status.Revision != app.SyncedRevision || !app.ComparedItsSource() {
		return false
	}
	for key := range app.Status.Resources {
		if strings.HasPrefix(key, argocd.ApplicationGVK.Group+"/"+argocd.ApplicationGVK.Kind+"/") ||
			strings.HasPrefix(key, ApplicationSetGVK.Group+"/"+ApplicationSetGVK.Kind+"/") {
			return false
		}
	}
	return true
}

// unreachable names the cluster in the error of an Application on another cluster when that
// cluster did not answer (a refused or broken connection, a timeout, an API server that is not
// serving): the same words the fleet uses once its probes agree, so the first audit after an
// outage already says "cluster X unreachable" rather than the transport's error alone.
func unreachable(u *unit, err error) error {
	if u.cluster == nil || !transportError(err) {
		return err
	}
	return &unitError{msg: fmt.Sprintf("Application %s: cluster %s unreachable: %v", u.name, u.clusterName, err)}
}

// transportError says err is a connection the cluster's API server did not take or broke off
// (refused, reset, ended early): not an answer about the request, not a timeout (which a cache
// that never synced also gives, when the auditor may not list a kind), not a credential or
// certificate that failed, not an aggregated API that is down while the cluster serves.
func transportError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || utilnet.IsProbableEOF(err)
}

// prepare reads a unit's Application, picks its revision, renders it and scopes the render:
// everything before the comparison.
func (a *Auditor) prepare(ctx context.Context, req Request, u *unit, lap func(string)) error {
	if u.app == nil && u.git == nil {
		app, err := a.application(ctx, u.appNS, u.name)
		if err != nil {
			return err
		}
		u.app = app
	}
	u.live = u.app != nil
	app := u.app
	if u.git != nil {
		app = u.app.WithGitSpec(u.git)
		u.app = app
	}
	if app != nil && app.ControlPlaneNamespace != a.AppNamespace {
		app = app.WithControlPlane(a.AppNamespace) // for $ARGOCD_APP_NAME (App.InstanceName)
		u.app = app
	}
	if err := a.destination(ctx, u, app); err != nil {
		return err
	}
	if u.elsewhere && (u.clusterName != "" || declaresNoApplications(app)) {
		// Audited by the replica that owns its cluster; not rendered here. One on Argo CD's
		// own cluster is rendered only for the Applications it may declare.
		return nil
	}
	res, err := a.renderer().renderUnit(ctx, req, u, app, lap)
	if err != nil {
		return err
	}
	return a.index(ctx, u, app, res, lap, req.renders)
}

// index scopes a unit's render: its objects indexed, their kinds, the Unknown ones and hooks.
func (a *Auditor) index(ctx context.Context, u *unit, app *argocd.App, res *render.Result, lap func(string), keep bool) error {
	var err error
	if keep {
		u.rendered = res
	}
	lap("render")
	destNS := "default" // where Argo CD places a namespaced object without one, with no destination namespace
	if app != nil && app.DestinationNamespace != "" {
		destNS = app.DestinationNamespace
	}
	// The render is held as JSON, each object decoded only while it is scoped, compared or
	// diffed: a 10,000-object render held decoded through the audit cost ~40 MB of heap beside
	// the live cache and Argo CD's diff.
	if u.self != nil {
		if res, err = withObjects(res, u.self); err != nil {
			return err
		}
	}
	if res, err = a.withGenerated(ctx, u, res, destNS); err != nil {
		return err
	}
	u.idx, u.kinds, u.unknown, u.hooks, err = a.scope(u.on(a), res, destNS)
	return err
}
