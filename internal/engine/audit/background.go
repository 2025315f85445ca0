package audit

import (
	"context"
	"fmt"
	"sync"

	"github.com/llm-gitops/platform/internal/engine/render"
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
	a.bgs.mu.Lock()
	defer a.bgs.mu.Unlock()
	if b := a.bgs.bg[env]; b != nil && !b.done && !b.stopped {
		return b.revision
	}
	return ""
}

// behind renders an env's own target leaving a render the cache cannot answer to the
// background: the wrapper around foreground that a daemon's full audits use (background).
type behind struct {
	fg foreground
	// ended is RenderedInBackground: told when an env's render ends.
	ended func(env string)
	*backgroundState
}

// backgroundState is the Auditor's renders in the background: one per env.
type backgroundState struct {
	mu sync.Mutex
	bg map[string]*bgRender // per env
}

// behind is the Auditor's background wrapper around its foreground renders.
func (a *Auditor) behind() behind {
	return behind{fg: a.foreground(), ended: a.RenderedInBackground, backgroundState: a.bgs}
}

// renderTarget is foreground's renderTarget, except that a render the cache cannot answer is left
// running in the background and a RenderingError returned; the audit after it ends gets its
// result.
func (b behind) renderTarget(ctx context.Context, env, target, revision string, v render.Variant) (*render.Result, error) {
	key, err := render.CacheRevision(revision, v)
	if err != nil {
		return nil, err
	}
	if res, ok, err := b.take(env, key); ok {
		return res, err
	}
	if res, ok := b.fg.renders.ByRevisionRaw(target, key); ok {
		b.stop(env, key)
		return res, nil
	}
	if err := b.running(env, key); err != nil {
		return nil, err
	}
	src, err := render.AtRevision(b.fg.repo, revision)
	if err != nil {
		return nil, err
	}
	eng, t := b.fg.engine(), render.Target{Name: target, Variant: v}
	if res, ok := eng.Cached(src, t); ok {
		b.stop(env, key)
		return res, nil
	}
	res, _, err := b.start(ctx, env, revision, key, src, t)
	return res, err
}

// background says whether a full audit of env may leave its render to the background: the
// Auditor is asked to, its renders run in a render worker (which a render no longer needed can
// be stopped in; in process, renders of several envs would run at once in this heap), and env
// has a report to stand meanwhile.
func (a *Auditor) background(req Request) bool {
	if a.RenderedInBackground == nil || a.Renders == nil || a.Renders.Worker == nil || req.Revision != "" {
		return false
	}
	a.state.mu.Lock()
	defer a.state.mu.Unlock()
	return a.state.units[req.Env] != nil
}

// take hands an ended background render of key to the audit that wants it: its error,
// or its result when the cache did not keep it, once (ok). An ended render of another key is
// dropped.
func (bh behind) take(env, key string) (res *render.Result, ok bool, err error) {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	return bh.takeLocked(env, key)
}

func (bh behind) takeLocked(env, key string) (*render.Result, bool, error) {
	b := bh.bg[env]
	if b == nil || !b.done {
		return nil, false, nil
	}
	delete(bh.bg, env)
	if b.key != key || b.stopped || (b.res == nil && b.err == nil) {
		return nil, false, nil
	}
	return b.res, true, b.err
}

// running returns a RenderingError when env's render runs and the audit wanting key
// should wait for it without snapshotting the tree (at every watch event in env meanwhile): it
// renders key, or key was found not cached already. A new key is let through once, so that a
// revision the content cache holds (a revert of the commit rendering) is audited at once.
func (bh behind) running(env, key string) error {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	b := bh.bg[env]
	if b == nil || b.done {
		return nil
	}
	if b.key == key || b.checked == key {
		return &RenderingError{Env: env, Revision: b.revision}
	}
	b.checked = key
	return nil
}

// stop stops env's background render unless it renders key: an audit that got key's
// render from the cache (Argo CD rolled back, a revert) no longer needs it, and it would hold the
// render worker for minutes.
func (bh behind) stop(env, key string) {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	if b := bh.bg[env]; b != nil && b.key != key && !b.done {
		b.cancel()
		b.stopped = true
	}
}

// start starts rendering t from src (env at revision, cached under key) in the background
// and returns a RenderingError; RenderedInBackground(env) is called when it ends. One render runs
// per env: while one runs, a newer revision waits for it rather than stop it (commits every few
// seconds would otherwise stop every render; the content cache then answers the newer revision
// when it did not change the env's files). A render of key that ended since the caller looked is
// handed over instead (ok).
func (bh behind) start(ctx context.Context, env, revision, key string, src render.Source, t render.Target) (*render.Result, bool, error) {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	if b := bh.bg[env]; b != nil && !b.done {
		return nil, false, &RenderingError{Env: env, Revision: b.revision}
	}
	if res, ok, err := bh.takeLocked(env, key); ok {
		return res, true, err
	}
	if bh.bg == nil {
		bh.bg = map[string]*bgRender{}
	}
	bctx, cancel := context.WithCancel(ctx)
	b := &bgRender{key: key, revision: revision, cancel: cancel}
	bh.bg[env] = b
	go func() {
		// The cache keeps the render, held here as its JSON for the audit, which decodes it one
		// object at a time; a render reading a remote comes back decoded.
		res, err := bh.fg.engine().Render(bctx, src, t)
		bh.mu.Lock()
		b.done, b.res = true, res
		if err != nil {
			b.err = fmt.Errorf("%s at %.12s: %w", env, revision, err)
		}
		current := bh.bg[env] == b
		bh.mu.Unlock()
		cancel()
		if current && ctx.Err() == nil {
			bh.ended(env)
		}
	}()
	return nil, false, &RenderingError{Env: env, Revision: revision}
}
