package audit

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
)

// render renders env at revision, through the render cache when the Auditor has one.
func (a *Auditor) render(ctx context.Context, env, revision string) (*render.Result, error) {
	if res, ok := a.Renders.ByRevision(env, revision); ok {
		return res, nil
	}
	snap, err := a.Repo.Snapshot(revision)
	if err != nil {
		return nil, err
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return nil, err
	}
	res, err := src.RenderCachedContext(ctx, env, a.Renders)
	if err != nil {
		return nil, fmt.Errorf("%s at %.12s: %w", env, revision, err)
	}
	return res, nil
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
