package daemon

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// TestLiveConnKeepsItsAuditorWhileRepoAndCacheStay: the Auditor (its schema and render caches)
// lives as long as the repository and the cache it was made of.
func TestLiveConnKeepsItsAuditorWhileRepoAndCacheStay(t *testing.T) {
	made := 0
	mk := func(repo *gitrepo.Repo, c *live.Cache) *audit.Auditor {
		made++
		return audit.New(audit.Config{Repo: repo, Live: c})
	}
	l := &liveConn{}
	assert.Nil(t, l.Current())
	repo, next := &gitrepo.Repo{}, &gitrepo.Repo{}
	stopped := 0
	l.set(&live.Cache{}, func() { stopped++ })

	a := l.Auditor(repo, mk)
	assert.Same(t, a, l.Auditor(repo, mk), "the same repository and cache made a new Auditor")
	assert.Same(t, a, l.Current())
	b := l.Auditor(next, mk)
	assert.NotSame(t, a, b, "a new repository kept the old Auditor")
	l.set(&live.Cache{}, func() { stopped++ })
	assert.NotSame(t, b, l.Auditor(next, mk), "a new cache kept the old Auditor")
	assert.Equal(t, 3, made)

	assert.Equal(t, 1, stopped, "a new cache ends the informers of the one before")
	l.Close()
	l.Close()
	assert.Equal(t, 2, stopped, "Close ends the cache's informers once")
}
