package audit

import (
	"context"
	"fmt"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// askRepoServer renders a unit by Argo CD's repo-server at the revisions Argo CD synced (the
// forced revision for the sources of the audited repository): every source, with the
// Application's own options and .argocd-source files, as the controller asks for them. A
// repo-server that fails makes the Application Unknown with its reason; the others are audited.
func (a *Auditor) askRepoServer(ctx context.Context, req Request, u *unit, app *argocd.App) (*render.Result, error) {
	spec := app.Spec()
	revs := reposerver.SyncedRevisions(spec)
	switch {
	case app.Chart != "" && len(app.Sources) == 0, u.foreign:
		// A chart of a chart repository, or another Git repository: the revision Argo CD synced,
		// as it records it; the targetRevision when a revision of Git is asked for, or before a
		// sync.
		if revs[0] == "" || req.Revision != "" && !u.foreign {
			revs[0] = app.TargetRevision
		}
		u.desired, u.head, u.pending = revs[0], revs[0], false
	default:
		var err error
		if u.desired, u.head, u.pending, err = a.revisions(app, req); err != nil {
			return nil, err
		}
		for i, s := range spec.Spec.GetSources() {
			if s.Chart == "" && s.RepoURL == app.RepoURL && (len(app.Sources) == 0 || s.Path == app.Path || req.Revision != "") {
				revs[i] = u.desired
			}
		}
	}
	settings, err := a.argoSettings(ctx)
	if err != nil {
		return nil, err
	}
	srv, err := u.on(a).Server()
	if err != nil {
		return nil, err
	}
	repos, integrity, err := a.project(ctx, app.Project)
	if err != nil {
		return nil, &unitError{msg: err.Error(), cause: err}
	}
	res, err := a.RepoServer.Manifests(ctx, reposerver.Request{App: spec, Revisions: revs, KubeVersion: srv.Version,
		APIVersions: srv.APIVersions, Settings: settings, ControllerNamespace: a.AppNamespace,
		ProjectSourceRepos: repos, SourceIntegrity: integrity})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &unitError{msg: err.Error(), cause: err}
	}
	reposerver.Untrack(res.Objects, settings)
	return &render.Result{Env: u.key, Path: app.Path, Revision: u.desired, Objects: res.Objects}, nil
}

// argoSettings reads the argocd-cm settings the controller sends the repo-server (Argo CD's
// defaults when the auditor may not read it), parsed once per version of the ConfigMap.
func (a *Auditor) argoSettings(ctx context.Context) (reposerver.Settings, error) {
	u, err := a.Live.GetDirect(ctx, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, a.AppNamespace, argocd.ConfigMapName)
	var data map[string]string
	rv := ""
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
	case err != nil:
		return reposerver.Settings{}, fmt.Errorf("argocd-cm: %w", err)
	default:
		data, _, _ = unstructured.NestedStringMap(u.Object, "data")
		rv = u.GetResourceVersion()
	}
	a.cache.argoMu.Lock()
	defer a.cache.argoMu.Unlock()
	if a.cache.argoOf != nil && *a.cache.argoOf == rv {
		return a.cache.argo, nil
	}
	s, err := reposerver.SettingsFrom(ctx, data)
	if err != nil {
		return reposerver.Settings{}, err
	}
	a.cache.argo, a.cache.argoOf = s, &rv
	return s, nil
}

// project reads the Application's AppProject for what the controller sends the repo-server with
// it: its spec.sourceRepos and its effective source-integrity policy (sourceIntegrity, or the
// legacy signatureKeys), with which the repo-server verifies the commit's signature before it
// renders. A project that does not exist sends neither, as for the controller; one the auditor
// cannot read is an error: rendering without its policy would render a commit Argo CD refuses.
func (a *Auditor) project(ctx context.Context, name string) ([]string, *v1alpha1.SourceIntegrity, error) {
	if name == "" {
		name = "default"
	}
	u, err := a.Live.GetDirect(ctx, schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AppProject"}, a.AppNamespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("AppProject %s/%s: %w (its source-integrity policy is sent with every render)", a.AppNamespace, name, err)
	}
	var proj v1alpha1.AppProject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &proj); err != nil {
		return nil, nil, fmt.Errorf("AppProject %s/%s: %w", a.AppNamespace, name, err)
	}
	return proj.Spec.SourceRepos, proj.EffectiveSourceIntegrity(), nil
}
