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

// bgRender is one env's render running, or ended, in the background. An ended one the cache did
// not keep (its kustomization fetches a remote base or file) holds its result for the next audit
// of its key; one the cache kept is taken from the cache.
type bgRender struct {
	key, revision string
	cancel        context.CancelFunc
	done, stopped bool
	// checked is a key whose render the cache was found not to hold while this one runs: an
	// audit wanting it waits without looking again.
	checked string
	res     *render.Result
	err     error
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
// Auditor is asked to, its renders run in a render worker (which a render no longer needed can
// be stopped in; in process, renders of several envs would run at once in this heap), and env
// has a report to stand meanwhile.
func (a *Auditor) background(req Request) bool {
	if a.RenderedInBackground == nil || a.Renders == nil || a.Renders.Worker == nil || req.Revision != "" {
		return false
	}
	a.statesMu.Lock()
	defer a.statesMu.Unlock()
	return a.states[req.Env] != nil
}

// takeBackground hands an ended background render of key to the audit that wants it: its error,
// or its result when the cache did not keep it, once (ok). An ended render of another key is
// dropped.
func (a *Auditor) takeBackground(env, key string) (res *render.Result, ok bool, err error) {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	return a.takeLocked(env, key)
}

func (a *Auditor) takeLocked(env, key string) (*render.Result, bool, error) {
	b := a.bg[env]
	if b == nil || !b.done {
		return nil, false, nil
	}
	delete(a.bg, env)
	if b.key != key || b.stopped || (b.res == nil && b.err == nil) {
		return nil, false, nil
	}
	return b.res, true, b.err
}

// runningBackground returns a RenderingError when env's render runs and the audit wanting key
// should wait for it without snapshotting the tree (at every watch event in env meanwhile): it
// renders key, or key was found not cached already. A new key is let through once, so that a
// revision the content cache holds (a revert of the commit rendering) is audited at once.
func (a *Auditor) runningBackground(env, key string) error {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	b := a.bg[env]
	if b == nil || b.done {
		return nil
	}
	if b.key == key || b.checked == key {
		return &RenderingError{Env: env, Revision: b.revision}
	}
	b.checked = key
	return nil
}

// stopBackground stops env's background render unless it renders key: an audit that got key's
// render from the cache (Argo CD rolled back, a revert) no longer needs it, and it would hold the
// render worker for minutes.
func (a *Auditor) stopBackground(env, key string) {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && b.key != key && !b.done {
		b.cancel()
		b.stopped = true
	}
}

// startBackground starts rendering t from src (env at revision, cached under key) in the background
// and returns a RenderingError; RenderedInBackground(env) is called when it ends. One render runs
// per env: while one runs, a newer revision waits for it rather than stop it (commits every few
// seconds would otherwise stop every render; the content cache then answers the newer revision
// when it did not change the env's files). A render of key that ended since the caller looked is
// handed over instead (ok).
func (a *Auditor) startBackground(ctx context.Context, env, revision, key string, src render.Source, t render.Target) (*render.Result, bool, error) {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if b := a.bg[env]; b != nil && !b.done {
		return nil, false, &RenderingError{Env: env, Revision: b.revision}
	}
	if res, ok, err := a.takeLocked(env, key); ok {
		return res, true, err
	}
	if a.bg == nil {
		a.bg = map[string]*bgRender{}
	}
	bctx, cancel := context.WithCancel(ctx)
	b := &bgRender{key: key, revision: revision, cancel: cancel}
	a.bg[env] = b
	go func() {
		// The cache keeps the render, held here as its JSON for the audit, which decodes it one
		// object at a time; a render reading a remote comes back decoded.
		res, err := render.Engine{Cache: a.Renders, Raw: true}.Render(bctx, src, t)
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
	return nil, false, &RenderingError{Env: env, Revision: revision}
}
