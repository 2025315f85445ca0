// Package audit runs one audit of one environment end to end: it picks the revision Argo CD
// synced, renders it, brings the live cache up to date for its kinds and compares.
package audit

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
)

// Auditor audits environments of one repository against one cluster.
type Auditor struct {
	Repo *gitrepo.Repo
	Live *live.Cache
	// Options for the comparison; Ignore is filled from each Application.
	Options drift.Options
	// AppNamespace holds the Applications (argocd); AppName maps an env to its Application.
	AppNamespace string
	AppName      func(env string) string
}

// New returns an Auditor with the repository's conventions: Application llm-<env> in argocd.
func New(repo *gitrepo.Repo, cache *live.Cache) *Auditor {
	return &Auditor{
		Repo: repo, Live: cache, Options: drift.DefaultOptions(), AppNamespace: "argocd",
		AppName: func(env string) string { return "llm-" + env },
	}
}

// Request says what to audit.
type Request struct {
	Env string
	// Revision forces the desired revision; empty means the one Argo CD synced, or the branch head.
	Revision string
}

// Run audits one environment.
func (a *Auditor) Run(ctx context.Context, req Request) (*drift.Report, error) {
	app, err := a.application(ctx, req.Env)
	if err != nil {
		return nil, err
	}
	branch := "HEAD"
	if app != nil && app.TargetRevision != "" && app.TargetRevision != "HEAD" {
		branch = app.TargetRevision
	}
	head, err := a.Repo.Resolve(branch)
	if err != nil {
		return nil, err
	}
	desired := head
	switch {
	case req.Revision != "":
		if desired, err = a.Repo.Resolve(req.Revision); err != nil {
			return nil, err
		}
	case app != nil && app.SyncedRevision != "":
		if desired, err = a.Repo.Resolve(app.SyncedRevision); err != nil {
			return nil, fmt.Errorf("Application %s/%s is synced to %s, which the repository does not have (fetch it?): %w", app.Namespace, app.Name, app.SyncedRevision, err)
		}
	}
	snap, err := a.Repo.Snapshot(desired)
	if err != nil {
		return nil, err
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return nil, err
	}
	res, err := src.Render(req.Env)
	if err != nil {
		return nil, fmt.Errorf("%s at %.12s: %w", req.Env, desired, err)
	}
	if err := a.Live.Watch(ctx, kindsOf(res), a.Options.ExtraKinds); err != nil {
		return nil, fmt.Errorf("%s: %w", req.Env, err)
	}
	opts := a.Options
	if app != nil {
		opts.Ignore = append(append([]drift.IgnoreRule{}, opts.Ignore...), app.Ignore...)
	}
	objs := drift.Audit(res.Objects, a.Live, opts)
	rep := &drift.Report{Env: req.Env, Revision: desired, Objects: objs, InSync: len(objs) == 0}
	if rep.Objects == nil {
		rep.Objects = []drift.Object{}
	}
	if app != nil {
		if err := a.argoVerdicts(ctx, app, res, rep); err != nil {
			return nil, err
		}
	}
	if head != desired {
		rep.PendingSync = req.Revision == ""
		rep.HeadRevision = head
	}
	return rep, nil
}

// application reads the env's Application; nil when Argo CD (or the Application) is absent.
func (a *Auditor) application(ctx context.Context, env string) (*argocd.App, error) {
	u, err := a.Live.GetDirect(ctx, argocd.ApplicationGVK, a.AppNamespace, a.AppName(env))
	var kerr *live.KindError
	if apierrors.IsNotFound(err) || errors.As(err, &kerr) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return argocd.FromUnstructured(u)
}

func kindsOf(res *render.Result) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, o := range res.Objects {
		gvk := o.GroupVersionKind()
		if !seen[gvk] {
			seen[gvk] = true
			out = append(out, gvk)
		}
	}
	return out
}
