package daemon

import (
	"context"
	"sync"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// liveConn is the daemon's connection to Argo CD's cluster: the live cache (its informers) and
// the Auditor made of it and the repository, kept while both are the same so its schema and
// render caches persist across audits. It owns its lock.
type liveConn struct {
	mu      sync.RWMutex
	cache   *live.Cache
	stop    context.CancelFunc // ends the cache's informers
	auditor *audit.Auditor
}

// Cache is the live cache; nil before set.
func (l *liveConn) Cache() *live.Cache {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cache
}

// set makes c the live cache, and ends the informers of the one before; stop ends c's (Close).
func (l *liveConn) set(c *live.Cache, stop context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		l.stop()
	}
	l.cache, l.stop = c, stop
}

// Auditor is the Auditor of repo and the live cache: the last one made when it audits the
// same two, else one made anew by make.
func (l *liveConn) Auditor(repo *gitrepo.Repo, make func(*gitrepo.Repo, *live.Cache) *audit.Auditor) *audit.Auditor {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.auditor; a != nil && a.Repo == repo && a.Live == l.cache {
		return a
	}
	l.auditor = make(repo, l.cache)
	return l.auditor
}

// Current is the last Auditor made (nil before the first audit), for the status and metrics.
func (l *liveConn) Current() *audit.Auditor {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.auditor
}

// Close ends the cache's informers.
func (l *liveConn) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
}
