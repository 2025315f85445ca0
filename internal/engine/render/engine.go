package render

import (
	"context"
	"fmt"

	"github.com/llm-gitops/platform/internal/engine/layout"
)

// Target is what a render reads of a Source: an env's overlay (Name is the env) or an
// Application's source path (Name is AppTarget(path)), and the options its Application adds.
type Target struct {
	Name    string
	Variant Variant
}

// Renderer renders a target of a source to its manifests. It is the package's one entry point:
// Engine renders in process; an Application's repo-server renders for the audit instead when
// there is one.
type Renderer interface {
	Render(ctx context.Context, s Source, t Target) (*Result, error)
}

// Engine renders in process, as Argo CD's repo-server does: kustomize where the target holds a
// kustomization, Helm where it holds a Chart.yaml, else a plain directory, with the target's
// variant applied first.
type Engine struct {
	// Cache, when set, answers a render whose recorded reads all find the same content, and
	// keeps the renders it runs (in its Worker's child process when it has one, stopped when
	// ctx is cancelled). Nil renders every time.
	Cache *Cache
	// Raw asks for the objects as JSON (Result.Raw, shared with Cache: read only) when Cache
	// keeps the render: a render a Worker ran is then never decoded whole here. A render the
	// cache does not keep (its kustomization reads a remote) comes back decoded.
	Raw bool
}

// Render renders t from s.
func (e Engine) Render(ctx context.Context, s Source, t Target) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := s.WithVariant(t.Name, t.Variant)
	if err != nil {
		return nil, err
	}
	switch {
	case e.Cache == nil:
		return s.build(t.Name)
	case e.Raw && s.cacheRevision() != "":
		return s.renderRaw(ctx, t.Name, e.Cache)
	default:
		return s.renderCached(ctx, t.Name, e.Cache)
	}
}

// Apps renders what env's root Application syncs (its Applications; in this platform's
// layout apps/<env>: its Applications, its project, its release file as local config) with r,
// the root's path as the repository's layout says (layout.Read); nil when the repository has no
// such path.
func Apps(ctx context.Context, r Renderer, s Source, env string) (*Result, error) {
	l, err := layout.Read(s)
	if err != nil {
		return nil, err
	}
	e, ok := l.Env(env)
	if !ok || e.Apps == "" || !s.Has(e.Apps) {
		return nil, nil
	}
	res, err := r.Render(ctx, s, Target{Name: AppTarget(e.Apps)})
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", e.Apps, err)
	}
	return res, nil
}
