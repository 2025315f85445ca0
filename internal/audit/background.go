package audit

import (
	"context"
	"fmt"

	"github.com/llm-gitops/platform/internal/render"
)

// RenderingError says an env's full audit waits for a render running in the background (see
// Auditor.RenderedInBackground): the env's last report stands until the render ends.
type RenderingError struct {
	Env, Revision string
}

func (e *RenderingError) Error() string {
	return fmt.Sprintf("%s: rendering %.12s in the background", e.Env, e.Revision)
}

// bgRender is one env's render running, or ended, in the background.
type bgRender struct {
	key, revision string
	cancel        context.CancelFunc
	done          bool
	err           error
}

// Rendering returns the revision of env a background render is working on, or "".
func (a *Auditor) Rendering(env string) string {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && !b.done {
		return b.revision
	}
	return ""
}

// background says whether a full audit of env may leave its render to the background: the
// Auditor is asked to, and env has a report to stand meanwhile.
func (a *Auditor) background(req Request) bool {
	if a.RenderedInBackground == nil || a.Renders == nil || req.Revision != "" {
		return false
	}
	a.statesMu.Lock()
	defer a.statesMu.Unlock()
	return a.states[req.Env] != nil
}

// stopBackground stops env's background render unless it renders key: an audit of another
// revision (Argo CD rolled back to one the cache holds) no longer needs it, and it would hold the
// render worker for minutes.
func (a *Auditor) stopBackground(env, key string) {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && b.key != key {
		b.cancel()
		delete(a.bg, env)
	}
}

// renderInBackground starts rendering src (env at revision, cached under key) in the background
// unless that render is running already, and returns a RenderingError. A render that ended in an
// error returns that error once, to the first audit after it; the next audit renders again (a
// worker killed for memory may do better the next time). A render of another key supersedes
// the running one, which is stopped.
func (a *Auditor) renderInBackground(ctx context.Context, env, revision, key string, src render.Source) error {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil {
		if b.key == key && !b.done {
			return &RenderingError{Env: env, Revision: revision}
		}
		delete(a.bg, env)
		b.cancel()
		if b.key == key && b.err != nil {
			return b.err
		}
	}
	if a.bg == nil {
		a.bg = map[string]*bgRender{}
	}
	bctx, cancel := context.WithCancel(ctx)
	b := &bgRender{key: key, revision: revision, cancel: cancel}
	a.bg[env] = b
	go func() {
		_, err := src.RenderCachedContext(bctx, env, a.Renders)
		a.bgMu.Lock()
		b.done = true
		if err != nil {
			b.err = fmt.Errorf("%s at %.12s: %w", env, revision, err)
		}
		current := a.bg[env] == b && bctx.Err() == nil
		a.bgMu.Unlock()
		cancel()
		if current {
			a.RenderedInBackground(env)
		}
	}()
	return &RenderingError{Env: env, Revision: revision}
}
