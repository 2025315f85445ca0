package gitrepo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// A clone kept on disk (RemoteConfig.Dir) is a bare repository the next Open reuses: it fetches
// only what is new, and a directory holding a clone of another URL is made anew. HEAD resolves
// to the remote's HEAD, as Argo CD's targetRevision HEAD does.
func TestRemoteCloneOnDisk(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "one\n"})
	work := clone(t, bare)
	dir := filepath.Join(root, "state", "repo")
	open := func(url string) *Repo {
		r, err := NewRemote(RemoteConfig{URL: url, Dir: dir})
		require.NoError(t, err)
		repo, err := r.Open(context.Background())
		require.NoError(t, err)
		return repo
	}
	first := open("file://" + bare)
	head := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	got, err := first.Resolve("HEAD")
	require.NoError(t, err)
	assert.Equal(t, head, got, "HEAD is the remote's HEAD")
	out := gitOut(t, dir, "rev-parse", "refs/remotes/origin/main")
	assert.Equal(t, head, strings.TrimSpace(out), "the clone is a bare repository on disk that git reads")

	writeFiles(t, work, map[string]string{"a.txt": "two\n"})
	gitOut(t, work, "commit", "-qam", "two")
	gitOut(t, work, "push", "-q", "origin", "main")
	packs := func() []string {
		p, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
		return p
	}
	before := packs()
	second := open("file://" + bare) // a new process: the same directory
	head2 := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	got, err = second.Resolve("main")
	require.NoError(t, err)
	assert.Equal(t, head2, got)
	assert.Subset(t, packs(), before, "the earlier pack is kept: only the new commit was fetched")
	assert.Len(t, packs(), len(before)+1)
	for _, rev := range []string{"HEAD~1", "HEAD^", "main~1"} { // git's relative revisions, as on a directory
		got, err = second.Resolve(rev)
		require.NoError(t, err, rev)
		assert.Equal(t, head, got, rev)
	}

	other := newBare(t, root, "other.git", map[string]string{"b.txt": "b\n"})
	third := open("file://" + other)
	snap, err := third.Snapshot("HEAD")
	require.NoError(t, err)
	assert.Contains(t, snap.Files, "b.txt")
	assert.NotContains(t, snap.Files, "a.txt", "the clone of the other URL was replaced")
	_, err = os.Stat(filepath.Join(dir, "config"))
	assert.NoError(t, err)
}

// A file larger than MaxFileSize (a binary committed by mistake) is left out of a snapshot and
// listed with its size, by Snapshot and by Snapshots alike; the manifests are read.
func TestSnapshotOmitsLargeFiles(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat("x", MaxFileSize+1)
	bare := newBare(t, root, "platform.git", map[string]string{"overlays/prod/kustomization.yaml": "resources: []\n", "auditor": big})
	repo, err := Open("file://" + bare)
	require.NoError(t, err)
	snap, err := repo.Snapshot("")
	require.NoError(t, err)
	shared, err := repo.Snapshots().At("HEAD")
	require.NoError(t, err)
	for _, s := range []*Snapshot{snap, shared} {
		assert.Equal(t, map[string]int64{"auditor": MaxFileSize + 1}, s.Omitted)
		assert.NotContains(t, s.Files, "auditor")
		assert.Equal(t, "resources: []\n", string(s.Files["overlays/prod/kustomization.yaml"]))
	}
}

// An Update of a file larger than MaxFileSize (a ledger grown past 8 MiB) sees it whole: what it
// appends is added to it, nothing is dropped. Reads through Snapshot.File see it whole too.
func TestUpdateKeepsFilesLargerThanSnapshotsHold(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat("{\"id\":\"x\"}\n", MaxFileSize/11+1)
	bare := newBare(t, root, "platform.git", map[string]string{"ledger.jsonl": big})
	remote := fileRemote(t, bare)
	remote.cfg.Dir = filepath.Join(root, "clone")
	_, err := remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "append",
		Change: func(s *Snapshot) (map[string][]byte, error) {
			return map[string][]byte{"ledger.jsonl": append(append([]byte(nil), s.Files["ledger.jsonl"]...), "{\"id\":\"y\"}\n"...)}, nil
		}})
	require.NoError(t, err)
	got := gitOut(t, root, "--git-dir", bare, "show", "main:ledger.jsonl")
	assert.Equal(t, big+"{\"id\":\"y\"}", got, "the ledger kept every line and gained one")

	repo, err := Open("file://" + bare)
	require.NoError(t, err)
	snap, err := repo.Snapshot("main")
	require.NoError(t, err)
	require.Contains(t, snap.Omitted, "ledger.jsonl")
	data, ok, err := snap.File("ledger.jsonl")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, big+"{\"id\":\"y\"}\n", string(data))
}

// A remote whose HEAD names a branch it lacks (a bare repository made with another default
// branch) is fetched, and HEAD then means main.
func TestRemoteWithoutHEADBranch(t *testing.T) {
	root := t.TempDir()
	bare := filepath.Join(root, "platform.git")
	gitOut(t, root, "init", "-q", "--bare", "-b", "master", bare)
	work := filepath.Join(root, "seed")
	gitOut(t, root, "clone", "-q", bare, work)
	writeFiles(t, work, map[string]string{"a.txt": "a\n"})
	gitOut(t, work, "add", "-A")
	gitOut(t, work, "commit", "-qm", "a")
	gitOut(t, work, "push", "-q", "origin", "HEAD:refs/heads/main")
	main := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	for _, dir := range []string{"", filepath.Join(root, "clone")} {
		r, err := NewRemote(RemoteConfig{URL: "file://" + bare, Dir: dir})
		require.NoError(t, err)
		repo, err := r.Open(context.Background())
		require.NoError(t, err, "dir %q", dir)
		got, err := repo.Resolve("HEAD")
		require.NoError(t, err)
		assert.Equal(t, main, got)
	}
}

// Credentials in an http(s) URL are used, never written into the clone's config on disk.
func TestCloneOnDiskKeepsNoCredentials(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "a\n"})
	srv := gittest.HTTPServer(t, root, "bot", "s3cret-token")
	dir := filepath.Join(root, "clone")
	r, err := NewRemote(RemoteConfig{URL: strings.Replace(srv.URL, "http://", "http://bot:s3cret-token@", 1) + "/platform.git", Dir: dir})
	require.NoError(t, err)
	repo, err := r.Open(context.Background())
	require.NoError(t, err)
	_, err = repo.Resolve("main")
	require.NoError(t, err)
	config, err := os.ReadFile(filepath.Join(dir, "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(config), "s3cret-token")
	assert.Contains(t, string(config), srv.URL+"/platform.git")
	_ = bare
}

// A clone on disk torn by a process killed mid-fetch (an empty ref file) is cloned anew by the
// next Open, and a local branch a write left behind does not hide the remote's newer head.
func TestCloneOnDiskRecoversFromATornRef(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "a\n"})
	dir := filepath.Join(root, "clone")
	remote := func() *Remote {
		r, err := NewRemote(RemoteConfig{URL: "file://" + bare, Dir: dir})
		require.NoError(t, err)
		return r
	}
	_, err := remote().Open(context.Background())
	require.NoError(t, err)
	// A write through the same directory leaves refs/heads/main at its commit.
	_, err = remote().Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "b",
		Change: func(*Snapshot) (map[string][]byte, error) { return map[string][]byte{"b.txt": []byte("b\n")}, nil }})
	require.NoError(t, err)
	work := clone(t, bare)
	writeFiles(t, work, map[string]string{"c.txt": "c\n"})
	gitOut(t, work, "add", "-A")
	gitOut(t, work, "commit", "-qm", "c")
	gitOut(t, work, "push", "-q", "origin", "main")
	head := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "refs", "remotes", "origin", "main"), nil, 0o644))

	repo, err := remote().Open(context.Background())
	require.NoError(t, err, "a torn clone is cloned again")
	got, err := repo.Resolve("main")
	require.NoError(t, err)
	assert.Equal(t, head, got, "the remote's head, not the branch the write left")
}

// A fetch reads the password file again: rotated to a wrong token it fails as an AuthError,
// rotated back it fetches the new commit.
func TestFetchReadsRotatedCredentials(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "a\n"})
	srv := gittest.HTTPServer(t, root, "bot", "s3cret-token")
	pw := filepath.Join(root, "password")
	require.NoError(t, os.WriteFile(pw, []byte("s3cret-token\n"), 0o600))
	r, err := NewRemote(RemoteConfig{URL: srv.URL + "/platform.git", Username: "bot", PasswordFile: pw, Dir: filepath.Join(root, "clone")})
	require.NoError(t, err)
	repo, err := r.Open(context.Background())
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(pw, []byte("revoked-token\n"), 0o600))
	err = repo.Fetch(context.Background())
	var auth *AuthError
	require.ErrorAs(t, err, &auth, "the fetch used the file's new content")

	work := clone(t, bare)
	writeFiles(t, work, map[string]string{"a.txt": "b\n"})
	gitOut(t, work, "commit", "-qam", "b")
	gitOut(t, work, "push", "-q", "origin", "main")
	require.NoError(t, os.WriteFile(pw, []byte("s3cret-token\n"), 0o600))
	require.NoError(t, repo.Fetch(context.Background()))
	got, err := repo.Resolve("main")
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD")), got)
}

// A fetch of a clone on disk runs beside its readers: while the server holds the fetch, reads
// answer at once from what was fetched before. Once the server answers, the new commit, a new
// tag, a deleted branch and a deleted tag are all seen, as `git fetch --prune` would leave them.
func TestFetchOnDiskDoesNotHoldReaders(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "one\n"})
	work := clone(t, bare)
	gitOut(t, work, "tag", "v1")
	gitOut(t, work, "push", "-q", "origin", "v1", "HEAD:refs/heads/old")
	first := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))

	backend := gittest.HTTPHandler(t, root, "bot", "pw")
	stall := make(chan struct{})
	var release sync.Once
	var stalled atomic.Int32
	var holding atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if holding.Load() {
			stalled.Add(1)
			select {
			case <-stall:
			case <-r.Context().Done():
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { release.Do(func() { close(stall) }) }) // runs before the server's Close, which waits for handlers
	pw := filepath.Join(root, "password")
	require.NoError(t, os.WriteFile(pw, []byte("pw\n"), 0o600))
	r, err := NewRemote(RemoteConfig{URL: srv.URL + "/platform.git", Username: "bot", PasswordFile: pw, Dir: filepath.Join(root, "clone")})
	require.NoError(t, err)
	repo, err := r.Open(context.Background())
	require.NoError(t, err)

	writeFiles(t, work, map[string]string{"a.txt": "two\n"})
	gitOut(t, work, "commit", "-qam", "two")
	gitOut(t, work, "tag", "v2")
	gitOut(t, work, "push", "-q", "origin", "main", "v2", ":refs/heads/old", ":refs/tags/v1")
	second := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))

	holding.Store(true)
	fetched := make(chan error, 1)
	go func() { fetched <- repo.Fetch(context.Background()) }()
	require.Eventually(t, func() bool { return stalled.Load() > 0 }, 10*time.Second, 5*time.Millisecond, "the fetch never reached the server")
	read := make(chan string, 1)
	go func() {
		got, err := repo.Resolve("main")
		assert.NoError(t, err)
		data, err := repo.ReadFile(got, "a.txt")
		assert.NoError(t, err)
		read <- got + " " + string(data)
	}()
	select {
	case got := <-read:
		assert.Equal(t, first+" one\n", got, "a read during the fetch sees what was fetched before")
	case <-time.After(10 * time.Second):
		t.Fatal("a read waited for the stalled fetch")
	}
	holding.Store(false)
	release.Do(func() { close(stall) })
	require.NoError(t, <-fetched)

	for rev, want := range map[string]string{"main": second, "v2": second} {
		got, err := repo.Resolve(rev)
		require.NoError(t, err, rev)
		assert.Equal(t, want, got, rev)
	}
	data, err := repo.ReadFile(second, "a.txt")
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(data))
	for _, gone := range []string{"old", "v1"} {
		_, err := repo.Resolve(gone)
		assert.Error(t, err, "%s was deleted on the remote", gone)
	}
	assert.Equal(t, strings.Join([]string{second + " refs/remotes/origin/main", second + " refs/tags/v2"}, "\n"),
		strings.TrimSpace(gitOut(t, filepath.Join(root, "clone"), "for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes", "refs/tags")),
		"git reads the clone's branches and tags as the remote has them")
}

// A clone on disk is read from many goroutines at once (the audits, the schedules, blame and the
// web view): each read is whole and right. Run with -race: go-git's storage on disk loads its
// pack indexes lazily, so unserialised reads race.
func TestCloneOnDiskReadsFromManyGoroutines(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "a\n", "b/c.txt": "c\n"})
	r, err := NewRemote(RemoteConfig{URL: "file://" + bare, Dir: filepath.Join(root, "clone")})
	require.NoError(t, err)
	repo, err := r.Open(context.Background())
	require.NoError(t, err)
	// A fetch brings a new pack: the storage indexes it at the next read.
	work := filepath.Join(root, "work")
	gitOut(t, root, "clone", "-q", bare, work)
	writeFiles(t, work, map[string]string{"b/c.txt": "c2\n"})
	gitOut(t, work, "commit", "-qam", "c2")
	gitOut(t, work, "push", "-q", "origin", "HEAD:main")
	require.NoError(t, repo.Fetch(context.Background()))
	head := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := repo.Resolve("main")
			assert.NoError(t, err)
			assert.Equal(t, head, got)
			data, err := repo.ReadFile(head, "b/c.txt")
			assert.NoError(t, err)
			assert.Equal(t, "c2\n", string(data))
			snap, err := repo.Snapshot("")
			if assert.NoError(t, err) {
				assert.Len(t, snap.Files, 2)
			}
			_, err = repo.CommitOf(head)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
}
