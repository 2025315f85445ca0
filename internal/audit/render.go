package audit

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/release"
	"github.com/llm-gitops/platform/internal/render"
)

// render renders env at revision with the Application's source options (v: kustomize options
// and patches, helm options), as Argo CD builds it, through the render cache when the Auditor has one. What the cache answers comes as JSON
// (Result.Raw), decoded one object at a time by the audit. With background, a render the cache
// cannot answer is left running in the background and a RenderingError returned; the audit after
// it ends gets its result.
//
// unit keys the background render (the env for its own Application); target is what is rendered
// and cached (the env's overlay, or an Application's path: render.AppTarget).
func (a *Auditor) render(ctx context.Context, unit, target, revision string, v render.Variant, background bool) (*render.Result, error) {
	env := unit
	key, err := render.CacheRevision(revision, v)
	if err != nil {
		return nil, err
	}
	if background {
		if res, ok, err := a.takeBackground(env, key); ok {
			return res, err
		}
	}
	if res, ok := a.Renders.ByRevisionRaw(target, key); ok {
		if background {
			a.stopBackground(env, key)
		}
		return res, nil
	}
	if background {
		if err := a.runningBackground(env, key); err != nil {
			return nil, err
		}
	}
	src, err := render.AtRevision(a.Repo, revision)
	if err != nil {
		return nil, err
	}
	// As JSON from the cache: a worker's render is never decoded whole here. A render the cache
	// does not keep (a remote base) comes back decoded.
	eng, t := render.Engine{Cache: a.Renders, Raw: true}, render.Target{Name: target, Variant: v}
	if res, ok := eng.Cached(src, t); ok {
		if background {
			a.stopBackground(env, key)
		}
		return res, nil
	}
	if background {
		res, _, err := a.startBackground(ctx, env, revision, key, src, t)
		return res, err
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
	a.gitPatchesMu.Lock()
	defer a.gitPatchesMu.Unlock()
	key := env + "@" + head
	if p, ok := a.gitPatches[key]; ok {
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
	if a.gitPatches == nil {
		a.gitPatches = map[string][]render.Patch{}
	}
	for k := range a.gitPatches { // one head per env is enough
		if strings.HasPrefix(k, env+"@") {
			delete(a.gitPatches, k)
		}
	}
	a.gitPatches[key] = p
	return p, nil
}
