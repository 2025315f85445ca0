package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// gitSource is the daemon's Git part: the repository audited, fetched every interval and on
// each push webhook outside the audits, and what the last fetch said. It owns its lock; the
// audits, the schedules, blame and the web view read the repository through it.
type gitSource struct {
	open    func(context.Context) (*gitrepo.Repo, error) // opens (a URL: clones) the repository
	timeout time.Duration                                // bounds each fetch
	// fetched is told each fetch's outcome, and for how long the audited revision has been
	// the last good fetch's (logs, metrics).
	fetched func(err error, stale time.Duration)
	trigger chan struct{}

	mu        sync.RWMutex
	repo      *gitrepo.Repo
	lastFetch time.Time
	err       error
	subs      []chan struct{}
}

func newGitSource(open func(context.Context) (*gitrepo.Repo, error), timeout time.Duration, fetched func(error, time.Duration)) *gitSource {
	return &gitSource{open: open, timeout: timeout, fetched: fetched, trigger: make(chan struct{}, 1)}
}

// Repo is the repository as last fetched; nil before Open.
func (g *gitSource) Repo() *gitrepo.Repo {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.repo
}

// Fetched says when the last fetch that worked ended, and the error of the last one when it failed.
func (g *gitSource) Fetched() (time.Time, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.lastFetch, g.err
}

// Open opens the repository unless it is open already.
func (g *gitSource) Open(ctx context.Context) error {
	if g.Repo() != nil {
		return nil
	}
	return g.Refresh(ctx)
}

// Refresh fetches the repository (opens it, when it is not open yet). On failure the last good
// revision stays the audited one, and the error is kept until a fetch works; an open that fails
// is only returned. A fetch that works wakes every subscriber.
func (g *gitSource) Refresh(ctx context.Context) error {
	repo := g.Repo()
	var err error
	if repo == nil {
		repo, err = g.open(ctx)
	} else {
		fctx, cancel := context.WithTimeout(ctx, g.timeout)
		err = repo.Fetch(fctx)
		cancel()
	}
	if err != nil && g.Repo() == nil {
		return err // no repository yet: the caller retries the open (no fetch failed)
	}
	g.mu.Lock()
	if err != nil {
		g.err = err
	} else {
		g.repo, g.lastFetch, g.err = repo, time.Now(), nil
	}
	stale, subs := time.Since(g.lastFetch), g.subs
	g.mu.Unlock()
	if g.fetched != nil {
		g.fetched(err, stale)
	}
	if err != nil {
		return err
	}
	for _, s := range subs {
		select {
		case s <- struct{}{}:
		default: // woken already
		}
	}
	return nil
}

// Subscribe returns a channel told (once per wait) that a fetch worked: a revision may be new.
func (g *gitSource) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	g.mu.Lock()
	g.subs = append(g.subs, ch)
	g.mu.Unlock()
	return ch
}

// Trigger asks Run for a fetch now (the push webhook).
func (g *gitSource) Trigger() {
	select {
	case g.trigger <- struct{}{}:
	default:
	}
}

// Run fetches every interval and on each Trigger until ctx ends; after each fetch, failed or
// not, it calls after (the audits take it up).
func (g *gitSource) Run(ctx context.Context, interval time.Duration, after func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.trigger:
		}
		if err := g.Refresh(ctx); err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return
		}
		after()
	}
}
