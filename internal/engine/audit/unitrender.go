package audit

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// unitRenderer renders one unit's Application as Argo CD does: Argo CD's repo-server
// (byRepoServer) or the in-process engine (inProcess). Config.RepoServer picks one (renderer);
// nothing else chooses.
type unitRenderer interface {
	renderUnit(ctx context.Context, req Request, u *unit, app *argocd.App, lap func(string)) (*render.Result, error)
}

// renderer is the Auditor's unitRenderer.
func (a *Auditor) renderer() unitRenderer {
	if a.RepoServer != nil {
		return byRepoServer{a}
	}
	return inProcess{a}
}

// byRepoServer asks Argo CD's repo-server (askRepoServer). An env without an Application of its
// own has nothing to ask it for: it is rendered in process.
type byRepoServer struct{ a *Auditor }

func (r byRepoServer) renderUnit(ctx context.Context, req Request, u *unit, app *argocd.App, lap func(string)) (*render.Result, error) {
	if app == nil {
		return inProcess(r).renderUnit(ctx, req, u, app, lap)
	}
	u.renderedBy = RenderedByRepoServer
	res, err := r.a.askRepoServer(ctx, req, u, app)
	if errors.Is(err, reposerver.ErrUnreachable) && app.Unrenderable == "" {
		// Argo CD's repo-server down or unreachable: the engine in process renders what it can,
		// saying so, rather than leave the Application unaudited.
		own, ownErr := inProcess(r).renderUnit(ctx, req, u, app, lap)
		if ownErr == nil {
			u.renderedBy = RenderedInProcess + " (repo-server unreachable: " + err.Error() + ")"
			return own, nil
		}
		return nil, &unitError{msg: fmt.Sprintf("%v; rendered in process instead: %v", err, ownErr), cause: err}
	}
	return res, err
}

// inProcess renders with the engine in this process, as Argo CD's repo-server would: a chart
// of a chart repository, several sources, or one source of Git at the unit's revision with the
// Application's options and .argocd-source files.
type inProcess struct{ a *Auditor }

func (r inProcess) renderUnit(ctx context.Context, req Request, u *unit, app *argocd.App, lap func(string)) (*render.Result, error) {
	a := r.a
	u.renderedBy = RenderedInProcess
	if u.inGroup() && app != nil && app.Unrenderable != "" { // alone, an env renders its overlay's source
		return nil, &unitError{msg: fmt.Sprintf("Application %s: the auditor cannot render %s yet", u.name, app.Unrenderable)}
	}
	var err error
	if app != nil && app.Chart != "" && len(app.Sources) == 0 {
		return a.renderChart(ctx, u, app, req)
	}
	if u.desired, u.head, u.pending, err = a.revisions(app, req); err != nil {
		return nil, err
	}
	if app != nil {
		// What Argo CD merges into the source before it renders: .argocd-source*.yaml.
		if app, err = app.WithOverrides(func(rev, name string) ([]byte, error) {
			if rev == "" || req.Revision != "" {
				rev = u.desired
			}
			return a.Repo.ReadFile(rev, name)
		}); err != nil {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: %v", u.name, err)}
		}
		u.app = app
		if err := app.TypeError(); err != nil {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: %v (Argo CD refuses to render it)", u.name, err)}
		}
		if u.inGroup() && app.Unrenderable != "" {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: the auditor cannot render %s yet", u.name, app.Unrenderable)}
		}
	}
	lap("git")
	if app != nil && len(app.Sources) > 1 {
		return a.renderSources(ctx, u, app, req)
	}
	return r.renderSource(ctx, req, u, app)
}

// renderSource renders the one source of u's Application (or the env's overlay, without one)
// at u's revision with the Application's options; the env's own render is left to the
// background when the audit allows it.
func (r inProcess) renderSource(ctx context.Context, req Request, u *unit, app *argocd.App) (*render.Result, error) {
	a := r.a
	patches, err := a.patches(app, req.Env)
	if err != nil {
		return nil, err
	}
	v := render.Variant{Patches: patches}
	if v.Helm, err = a.helmOptions(u.on(a), app, u.target, u.desired); err != nil {
		return nil, err
	}
	if app != nil {
		if v.Kustomize, err = app.KustomizeOptions(u.desired); err != nil {
			return nil, fmt.Errorf("Application %s: %w", u.name, err)
		}
		if v.Directory = app.DirectoryOptions(u.desired); v.Directory != nil {
			v.Helm = nil // a directory source, whatever its path holds
		}
	}
	switch {
	case v.Helm != nil:
		u.renderedAs = renderedChart
	case v.Kustomize != nil && !reflect.DeepEqual(*v.Kustomize, render.KustomizeOptions{}):
		u.renderedAs = renderedWithOptions // names, images, labels: an overlay patch may not reach them
	}
	var targets targetRenderer = a.foreground()
	if u.own() && u.target == req.Env && a.background(req) {
		targets = a.behind() // the env's own render may take minutes: its last report stands meanwhile
	}
	return targets.renderTarget(ctx, u.key, u.target, u.desired, v)
}
