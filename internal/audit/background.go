package audit

import (
	"context"
	"fmt"

	"github.com/llm-gitops/platform/internal/render"
)

// RenderingError says an env's full audit waits for a render running in the background (see
// Auditor.RenderedInBackground): the env's last report stands until the render ends.
type RenderingError struct {
	// Revision is the commit being rendered: the one the audit wants, or one before it whose
	// render runs to its end first.
	Env, Revision string
}

func (e *RenderingError) Error() string {
	return fmt.Sprintf("%s: rendering %.12s in the background", e.Env, e.Revision)
}

// bgRender is one env's render running, or ended, in the background. An ended one holds its
// result (or error) for the next audit of its key, whether or not the cache kept it: a render
// the cache does not keep (it reads a remote base) is still used, once.
type bgRender struct {
	key, revision string
	cancel        context.CancelFunc
	done, stopped bool
	res           *render.Result
	err           error
}

// Rendering returns the revision a background render of env is working on (or waiting for the
// render worker to start), or "".
func (a *Auditor) Rendering(env string) string {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && !b.done && !b.stopped {
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

// takeBackground hands an ended background render of env to the audit that wants key: its
// result or its error, once (ok). An ended render of another key is dropped.
func (a *Auditor) takeBackground(env, key string) (res *render.Result, ok bool, err error) {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	b := a.bg[env]
	if b == nil || !b.done {
		return nil, false, nil
	}
	delete(a.bg, env)
	if b.key != key || b.stopped {
		return nil, false, nil
	}
	return b.res, true, b.err
}

// runningBackground returns the RenderingError for env's render still running, if one is.
func (a *Auditor) runningBackground(env string) error {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && !b.done {
		return &RenderingError{Env: env, Revision: b.revision}
	}
	return nil
}

// stopBackground stops env's background render unless it renders key: an audit that found
// key's render in the cache (Argo CD rolled back to a revision it holds) no longer needs it, and
// it would hold the render worker for minutes. A render in process cannot be stopped: it runs to
// its end, and no other render of env starts meanwhile.
func (a *Auditor) stopBackground(env, key string) {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && b.key != key && !b.done {
		b.cancel()
		b.stopped = true
	}
}

// renderInBackground starts rendering src (env at revision, cached under key) in the background
// and returns a RenderingError; RenderedInBackground(env) is called when it ends. The caller has
// made sure no render of env is running: one runs at a time per env, and a newer revision waits
// for it rather than stop it (commits every few seconds would otherwise stop every render; the
// content cache then answers the newer revision when it did not change the env's files).
func (a *Auditor) renderInBackground(ctx context.Context, env, revision, key string, src render.Source) error {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && !b.done {
		return &RenderingError{Env: env, Revision: b.revision}
	}
	if a.bg == nil {
		a.bg = map[string]*bgRender{}
	}
	bctx, cancel := context.WithCancel(ctx)
	b := &bgRender{key: key, revision: revision, cancel: cancel}
	a.bg[env] = b
	go func() {
		res, err := src.RenderCachedContext(bctx, env, a.Renders)
		a.bgMu.Lock()
		b.done, b.res = true, res
		if err != nil {
			b.err = fmt.Errorf("%s at %.12s: %w", env, revision, err)
		}
		current := a.bg[env] == b
		a.bgMu.Unlock()
		cancel()
		if current && ctx.Err() == nil {
			a.RenderedInBackground(env)
		}
	}()
	return &RenderingError{Env: env, Revision: revision}
}
