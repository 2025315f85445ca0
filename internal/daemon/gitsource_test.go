package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// gitSourceOf returns a Git part over a clone of a real bare repository (file://), the bare
// repository, and a work tree that pushes to it.
func gitSourceOf(t *testing.T) (*gitSource, string, string, *[]error) {
	t.Helper()
	dir := t.TempDir()
	bare := gittest.NewBare(t, dir, "platform.git", map[string]string{"README.md": "one\n"})
	clone := filepath.Join(t.TempDir(), "clone")
	var mu sync.Mutex
	var outcomes []error
	g := newGitSource(func(ctx context.Context) (*gitrepo.Repo, error) {
		remote, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: "file://" + bare, Dir: clone})
		if err != nil {
			return nil, err
		}
		return remote.Open(ctx)
	}, 30*time.Second, func(err error, _ time.Duration) {
		mu.Lock()
		outcomes = append(outcomes, err)
		mu.Unlock()
	})
	return g, bare, gittest.Clone(t, bare), &outcomes
}

func push(t *testing.T, work, content string) string {
	t.Helper()
	gittest.WriteFiles(t, work, map[string]string{"README.md": content})
	gittest.Run(t, work, "commit", "-q", "-am", "change")
	gittest.Run(t, work, "push", "-q", "origin", "HEAD:main")
	return strings.TrimSpace(gittest.Run(t, work, "rev-parse", "HEAD"))
}

func TestGitSourceFetchesNewCommitsAndWakesItsSubscribers(t *testing.T) {
	g, _, work, _ := gitSourceOf(t)
	assert.Nil(t, g.Repo(), "open before Open")
	require.NoError(t, g.Open(context.Background()))
	first := g.Repo()
	require.NoError(t, g.Open(context.Background()))
	assert.Same(t, first, g.Repo(), "a second Open opened the repository anew")
	woken := g.Subscribe()

	head := push(t, work, "two\n")
	require.NoError(t, g.Refresh(context.Background()))
	got, err := g.Repo().Resolve("")
	require.NoError(t, err)
	assert.Equal(t, head, got, "the fetch did not bring the pushed commit")
	select {
	case <-woken:
	default:
		assert.Fail(t, "a subscriber was not woken by a fetch that worked")
	}
	when, ferr := g.Fetched()
	require.NoError(t, ferr)
	assert.WithinDuration(t, time.Now(), when, time.Minute)
}

func TestGitSourceKeepsTheLastGoodRevisionWhenAFetchFails(t *testing.T) {
	g, bare, work, outcomes := gitSourceOf(t)
	require.NoError(t, g.Open(context.Background()))
	before, err := g.Repo().Resolve("")
	require.NoError(t, err)
	good, _ := g.Fetched()
	woken := g.Subscribe()

	push(t, work, "two\n")
	require.NoError(t, os.Rename(bare, bare+".gone")) // the Git server is gone
	err = g.Refresh(context.Background())
	require.Error(t, err)

	after, rerr := g.Repo().Resolve("")
	require.NoError(t, rerr)
	assert.Equal(t, before, after, "a failed fetch moved the audited revision")
	when, ferr := g.Fetched()
	assert.Equal(t, err, ferr, "the failed fetch's error is not what the status reads")
	assert.Equal(t, good, when, "a failed fetch counted as a fetch")
	select {
	case <-woken:
		assert.Fail(t, "a failed fetch woke a subscriber")
	default:
	}
	require.Len(t, *outcomes, 2)
	assert.NoError(t, (*outcomes)[0])
	assert.Equal(t, err, (*outcomes)[1])

	require.NoError(t, os.Rename(bare+".gone", bare)) // back: the next fetch clears the error
	require.NoError(t, g.Refresh(context.Background()))
	_, ferr = g.Fetched()
	assert.NoError(t, ferr)
}

func TestGitSourceFetchesOnTriggerAndTellsEachFetch(t *testing.T) {
	g, _, work, _ := gitSourceOf(t)
	require.NoError(t, g.Open(context.Background()))
	head := push(t, work, "two\n")
	ctx, cancel := context.WithCancel(context.Background())
	after := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, time.Hour, func() { after <- struct{}{} }) // no tick within the test: the trigger fetches
	}()
	g.Trigger()
	select {
	case <-after:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "no fetch within 30 s of a trigger")
	}
	got, err := g.Repo().Resolve("")
	require.NoError(t, err)
	assert.Equal(t, head, got)
	cancel()
	<-done
}
