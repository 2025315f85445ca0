package audit

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// The engines that render an Application (Config.RepoServer picks one).
const (
	RenderedByRepoServer = "repo-server"
	RenderedInProcess    = "in-process"
)

// targetRenderer renders one target of Git (an env's overlay, or an Application's path:
// render.AppTarget) at a revision with an Application's source options (v: kustomize options and
// patches, helm options), as Argo CD builds it: foreground, or behind (foreground leaving slow
// renders to the background). env keys a background render.
type targetRenderer interface {
	renderTarget(ctx context.Context, env, target, revision string, v render.Variant) (*render.Result, error)
}

// foreground renders a target through the render cache, waiting for a render the cache cannot
// answer. What the cache answers comes as JSON (Result.Raw), decoded one object at a time by the
// audit.
type foreground struct {
	repo    *gitrepo.Repo
	renders *render.Cache
}

// foreground is the Auditor's renders of Git's targets through its cache.
func (a *Auditor) foreground() foreground { return foreground{repo: a.Repo, renders: a.Renders} }

// engine is the in-process engine over the cache: a worker's render is never decoded whole
// here; a render the cache does not keep (a remote base) comes back decoded.
func (f foreground) engine() render.Engine { return render.Engine{Cache: f.renders, Raw: true} }

func (f foreground) renderTarget(ctx context.Context, _, target, revision string, v render.Variant) (*render.Result, error) {
	key, err := render.CacheRevision(revision, v)
	if err != nil {
		return nil, err
	}
	if res, ok := f.renders.ByRevisionRaw(target, key); ok {
		return res, nil
	}
	src, err := render.AtRevision(f.repo, revision)
	if err != nil {
		return nil, err
	}
	eng, t := f.engine(), render.Target{Name: target, Variant: v}
	if res, ok := eng.Cached(src, t); ok {
		return res, nil
	}
	res, err := eng.Render(ctx, src, t)
	if err != nil {
		return nil, fmt.Errorf("%s at %.12s: %w", render.TargetPath(target), revision, err)
	}
	return res, nil
}

// helmOptions are the options Argo CD renders an Application's chart with at revision (nil when
// its path is no chart): its helm source, with the live cluster's version and API versions, as
// Argo CD's controller sends them to its repo-server.
func (a *Auditor) helmOptions(c *live.Cache, app *argocd.App, target, revision string) (*render.HelmOptions, error) {
	if app == nil || !strings.HasPrefix(target, "@") {
		return nil, nil
	}
	if _, err := a.Repo.ReadFile(revision, path.Join(render.TargetPath(target), "Chart.yaml")); err != nil {
		return nil, nil // not a chart (or not there: the render says so)
	}
	srv, err := c.Server()
	if err != nil {
		return nil, fmt.Errorf("Application %s: the cluster's version and API versions, which its chart is rendered with: %w", app.Name, err)
	}
	return app.HelmOptions(revision, argocd.Cluster{KubeVersion: srv.Version, APIVersions: srv.APIVersions}), nil
}

// stopwatch returns a function that reports the time since its last call under a stage name.
func (a *Auditor) stopwatch() func(stage string) {
	last := time.Now()
	return func(stage string) {
		now := time.Now()
		if a.Timing != nil {
			a.Timing(stage, now.Sub(last))
		}
		last = now
	}
}

// prefetch starts watching kinds and fetches their group-versions' schema documents; errors are
// left to the audit's own calls, which ask again.
func prefetch(ctx context.Context, c *live.Cache, kinds []schema.GroupVersionKind) {
	if err := c.Watch(ctx, nil, kinds); err != nil {
		return
	}
	seen := map[schema.GroupVersion]bool{}
	var gvs []schema.GroupVersion
	for _, k := range kinds {
		if gv := k.GroupVersion(); !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
	}
	_, _, _ = c.OpenAPIModels(ctx, gvs)
}

// patches returns the kustomize patches Argo CD adds to env's overlay: the synced source's when
// Argo CD is there, else those of Git's Application (apps/<env> at the branch head).
func (a *Auditor) patches(app *argocd.App, env string) ([]render.Patch, error) {
	if app != nil {
		if len(app.KustomizeUnsupported) > 0 {
			return nil, fmt.Errorf("Application %s/%s sets kustomize options the auditor does not apply (%v): its render would not be what Argo CD applied",
				app.Namespace, app.Name, app.KustomizeUnsupported)
		}
		return app.KustomizePatches, nil
	}
	head, err := a.Repo.Resolve("HEAD")
	if err != nil {
		return nil, err
	}
	a.cache.patchesMu.Lock()
	defer a.cache.patchesMu.Unlock()
	key := env + "@" + head
	if p, ok := a.cache.patches[key]; ok {
		return p, nil
	}
	src, err := render.AtRevision(a.Repo, head)
	if err != nil {
		return nil, err
	}
	p, err := release.ApplicationPatches(src, env)
	if err != nil {
		return nil, err
	}
	if a.cache.patches == nil {
		a.cache.patches = map[string][]render.Patch{}
	}
	for k := range a.cache.patches { // one head per env is enough
		if strings.HasPrefix(k, env+"@") {
			delete(a.cache.patches, k)
		}
	}
	a.cache.patches[key] = p
	return p, nil
}
