package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/gittest"
)

func scaleChange(path, from, to string) ChangeFunc {
	return func(s *Snapshot) (map[string][]byte, error) {
		cur, ok := s.Files[path]
		if !ok {
			return nil, fmt.Errorf("%s missing", path)
		}
		next := bytes.Replace(cur, []byte(from), []byte(to), 1)
		return map[string][]byte{path: next}, nil
	}
}

func TestUpdateFileURL(t *testing.T) {
	dir := t.TempDir()
	bare := newBare(t, dir, "repo.git", map[string]string{
		"overlays/prod/scaledobject.yaml": "spec:\n  minReplicaCount: 1\n  maxReplicaCount: 8\n",
		"bin/tool.sh":                     "#!/bin/sh\n",
	})
	// An executable file must keep its mode.
	w := clone(t, bare)
	gitOut(t, w, "update-index", "--chmod=+x", "bin/tool.sh")
	gitOut(t, w, "commit", "-q", "-m", "exec")
	gitOut(t, w, "push", "-q")

	remote := fileRemote(t, bare)
	trailers := []Trailer{{"Schedule-Id", "pre-peak-eu"}, {"Fire-Time", "2025-01-02T07:00:00Z"}}
	req := UpdateRequest{
		Branch: "main", Author: bot, Message: "scale up prod before peak\n", Trailers: trailers,
		Change: func(s *Snapshot) (map[string][]byte, error) {
			// Exactly-once: the trailers already on the branch mean the job has run.
			hist, err := s.Log(context.Background(), "overlays/prod")
			if err != nil {
				return nil, err
			}
			if FindTrailers(hist, trailers...) != nil {
				return nil, nil
			}
			ch, err := scaleChange("overlays/prod/scaledobject.yaml", "minReplicaCount: 1", "minReplicaCount: 4")(s)
			if err != nil {
				return nil, err
			}
			ch["ledger/prod.log"] = []byte("model v1\n") // a new file in a new directory
			ch["bin/tool.sh"] = []byte("#!/bin/sh\necho hi\n")
			return ch, nil
		},
		Deadline: time.Now().Add(20 * time.Second),
	}
	res, err := remote.Update(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.NoChange || res.Attempts != 1 || len(res.Commit) != 40 {
		t.Fatalf("result %+v", res)
	}
	fsck(t, bare)
	w2 := clone(t, bare)
	if got := gitOut(t, w2, "rev-parse", "HEAD"); got != res.Commit {
		t.Fatalf("head %s, want %s", got, res.Commit)
	}
	if got := gitOut(t, w2, "rev-parse", "HEAD^"); got != res.Parent {
		t.Fatalf("parent %s, want %s", got, res.Parent)
	}
	if got := gitOut(t, w2, "log", "-1", "--format=%an <%ae>|%cn <%ce>"); got != "Auditor Bot <auditor@example.com>|Auditor Bot <auditor@example.com>" {
		t.Fatalf("identity %q", got)
	}
	want := "scale up prod before peak\n\nSchedule-Id: pre-peak-eu\nFire-Time: 2025-01-02T07:00:00Z"
	if got := gitOut(t, w2, "log", "-1", "--format=%B"); got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if got := gitOut(t, w2, "log", "-1", "--format=%(trailers:key=Schedule-Id,valueonly)"); got != "pre-peak-eu" {
		t.Fatalf("git trailers: %q", got)
	}
	if got := gitOut(t, w2, "show", "HEAD:overlays/prod/scaledobject.yaml"); !strings.Contains(got, "minReplicaCount: 4") {
		t.Fatalf("content %q", got)
	}
	if got := gitOut(t, w2, "ls-tree", "HEAD", "bin/tool.sh"); !strings.HasPrefix(got, "100755") {
		t.Fatalf("mode lost: %s", got)
	}
	if got := gitOut(t, w2, "diff", "--name-only", "HEAD^", "HEAD"); got != "bin/tool.sh\nledger/prod.log\noverlays/prod/scaledobject.yaml" {
		t.Fatalf("changed files %q", got)
	}

	// Running the job again: the trailers are found, nothing is committed.
	res2, err := remote.Update(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.NoChange || res2.Commit != "" || res2.Parent != res.Commit {
		t.Fatalf("second run %+v", res2)
	}

	// Deleting a file (the directory disappears with its last file).
	res3, err := remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "drop ledger",
		Change: func(*Snapshot) (map[string][]byte, error) { return map[string][]byte{"ledger/prod.log": nil}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	fsck(t, bare)
	gitOut(t, w2, "pull", "-q")
	if _, err := os.Stat(filepath.Join(w2, "ledger")); !os.IsNotExist(err) {
		t.Fatalf("ledger dir still there after %s: %v", res3.Commit, err)
	}

	// Read side: Log and FindTrailer via a URL-opened Repo, refreshed with Fetch.
	repo, err := Open("file://" + bare)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := repo.Log(context.Background(), "main", "overlays/prod/scaledobject.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Hash != res.Commit || hist[0].Subject != "scale up prod before peak" {
		t.Fatalf("log %+v", hist)
	}
	if c := FindTrailer(hist, "schedule-id", "pre-peak-eu"); c == nil || c.Hash != res.Commit {
		t.Fatalf("FindTrailer: %+v", c)
	}
	if v, _ := hist[0].Trailer("Fire-Time"); v != "2025-01-02T07:00:00Z" {
		t.Fatalf("trailer %q", v)
	}
	writeFiles(t, w2, map[string]string{"README": "x\n"})
	gitOut(t, w2, "add", "README")
	gitOut(t, w2, "commit", "-q", "-m", "readme")
	gitOut(t, w2, "push", "-q")
	if err := repo.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h, _ := repo.Resolve("main"); h != gitOut(t, w2, "rev-parse", "HEAD") {
		t.Fatalf("Fetch did not refresh: %s", h)
	}
	// Fetch is a no-op on a local directory.
	local, err := Open(w2)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateMissingBranch(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "empty.git")
	gitOut(t, dir, "init", "-q", "--bare", bare)
	remote := fileRemote(t, bare)
	change := func(*Snapshot) (map[string][]byte, error) { return map[string][]byte{"a/b.txt": []byte("b\n")}, nil }
	_, err := remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "m", Change: change})
	if !errors.Is(err, ErrBranchNotFound) {
		t.Fatalf("err %v", err)
	}
	res, err := remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "m", Change: change, CreateBranch: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, bare, "rev-parse", "main"); got != res.Commit {
		t.Fatalf("main %s want %s", got, res.Commit)
	}
	fsck(t, bare)
}

// TestUpdateRace runs 5 CLI pushers concurrently with one Update whose first attempt is held
// until they have all pushed: the Update must lose, recompute on the new head and land once.
func TestUpdateRace(t *testing.T) {
	dir := t.TempDir()
	bare := newBare(t, dir, "repo.git", map[string]string{"ledger/prod.log": "v0\n"})
	const n = 5
	works := make([]string, n)
	for i := range works {
		works[i] = clone(t, bare)
	}
	var pushed sync.WaitGroup
	pushed.Add(n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer pushed.Done()
			w := works[i]
			name := fmt.Sprintf("other-%d.txt", i)
			if err := os.WriteFile(filepath.Join(w, name), []byte(name+"\n"), 0o644); err != nil {
				errs <- err
				return
			}
			if out, err := gitTry(w, "add", name); err != nil {
				errs <- fmt.Errorf("%v: %s", err, out)
				return
			}
			if out, err := gitTry(w, "commit", "-q", "-m", "human "+name); err != nil {
				errs <- fmt.Errorf("%v: %s", err, out)
				return
			}
			for try := 0; ; try++ {
				out, err := gitTry(w, "push", "-q", "origin", "HEAD:main")
				if err == nil {
					return
				}
				if try > 50 {
					errs <- fmt.Errorf("push %s: %v: %s", name, err, out)
					return
				}
				time.Sleep(time.Duration(10+try*7) * time.Millisecond)
				if out, err := gitTry(w, "pull", "-q", "--rebase", "origin", "main"); err != nil {
					errs <- fmt.Errorf("pull: %v: %s", err, out)
					return
				}
			}
		}(i)
	}
	var calls atomic.Int32
	done := make(chan struct{})
	go func() { pushed.Wait(); close(done) }()
	remote := fileRemote(t, bare)
	res, err := remote.Update(context.Background(), UpdateRequest{
		Branch: "main", Author: bot, Message: "ledger: v1", Trailers: []Trailer{{"Model", "v1"}},
		Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		Change: func(s *Snapshot) (map[string][]byte, error) {
			if calls.Add(1) == 1 {
				<-done // lose the race on purpose
			}
			return map[string][]byte{"ledger/prod.log": append(append([]byte{}, s.Files["ledger/prod.log"]...), "v1\n"...)}, nil
		},
		Deadline: time.Now().Add(40 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if res.Attempts < 2 || calls.Load() != int32(res.Attempts) {
		t.Fatalf("attempts %d, Change calls %d", res.Attempts, calls.Load())
	}
	fsck(t, bare)
	w := clone(t, bare)
	if got := gitOut(t, w, "rev-list", "--count", "HEAD"); got != "7" {
		t.Fatalf("%s commits, want 7:\n%s", got, gitOut(t, w, "log", "--oneline"))
	}
	if got := gitOut(t, w, "rev-list", "--merges", "HEAD"); got != "" {
		t.Fatalf("merges in history: %s", got)
	}
	if got := gitOut(t, w, "log", "--format=%H", "--author=auditor@example.com"); got != res.Commit {
		t.Fatalf("bot commits %q, want exactly %s", got, res.Commit)
	}
	for i := 0; i < n; i++ {
		if _, err := os.Stat(filepath.Join(w, fmt.Sprintf("other-%d.txt", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(w, "ledger/prod.log")); string(got) != "v0\nv1\n" {
		t.Fatalf("ledger %q", got)
	}
	// The commit was built on the head the pushers left: only the ledger differs from its parent.
	if got := gitOut(t, w, "diff", "--name-only", res.Commit+"^", res.Commit); got != "ledger/prod.log" {
		t.Fatalf("diff against parent: %q", got)
	}
}

func gitHTTPServer(t *testing.T, root, user, pass string) *httptest.Server {
	t.Helper()
	return gittest.HTTPServer(t, root, user, pass)
}

func TestUpdateSmartHTTPAuth(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "a\n"})
	gitOut(t, bare, "config", "http.receivepack", "true")
	const secret = "s3cr3t-t0ken"
	srv := gitHTTPServer(t, root, "bot", secret)
	secrets := t.TempDir()
	good := filepath.Join(secrets, "token")
	bad := filepath.Join(secrets, "wrong")
	writeFiles(t, secrets, map[string]string{"token": secret + "\n", "wrong": "nope-not-it\n"})

	req := UpdateRequest{Branch: "main", Author: bot, Message: "over http",
		Change:   func(*Snapshot) (map[string][]byte, error) { return map[string][]byte{"b.txt": []byte("b\n")}, nil },
		Deadline: time.Now().Add(20 * time.Second)}

	wrong, err := NewRemote(RemoteConfig{URL: srv.URL + "/platform.git", Username: "bot", PasswordFile: bad})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Update(context.Background(), req)
	var authErr *AuthError
	if !errors.As(err, &authErr) {
		t.Fatalf("want *AuthError, got %T %v", err, err)
	}
	t.Logf("%v", err)
	if strings.Contains(err.Error(), "nope-not-it") || strings.Contains(err.Error(), secret) {
		t.Fatalf("error leaks the password: %v", err)
	}

	remote, err := NewRemote(RemoteConfig{URL: srv.URL + "/platform.git", Username: "bot", PasswordFile: good})
	if err != nil {
		t.Fatal(err)
	}
	res, err := remote.Update(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, bare, "rev-parse", "main"); got != res.Commit {
		t.Fatalf("main %s, want %s", got, res.Commit)
	}
	fsck(t, bare)
	// The read side over authenticated HTTP.
	repo, err := remote.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := repo.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.Files["b.txt"]) != "b\n" {
		t.Fatalf("snapshot %v", snap.Files)
	}
}

// A server that keeps failing (503 on every request) is retried, each retry reported to OnRetry,
// until the deadline; the error says how many attempts were made and what the last one met.
func TestUpdateDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	var retries atomic.Int32
	remote, err := NewRemote(RemoteConfig{URL: srv.URL + "/repo.git",
		OnRetry: func(attempt int, err error, wait time.Duration) {
			assert.Equal(t, int(retries.Add(1)), attempt)
			assert.Error(t, err)
			assert.Positive(t, wait)
		}})
	require.NoError(t, err)
	start := time.Now()
	_, err = remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "m",
		Change:   func(*Snapshot) (map[string][]byte, error) { return map[string][]byte{"a.txt": []byte("b\n")}, nil },
		Deadline: time.Now().Add(1500 * time.Millisecond),
		Backoff:  Backoff{Initial: 50 * time.Millisecond, Max: 300 * time.Millisecond}})
	var pe *PushError
	require.ErrorAs(t, err, &pe)
	assert.GreaterOrEqual(t, pe.Attempts, 2)
	assert.Equal(t, "main", pe.Branch)
	assert.Equal(t, pe.Attempts-1, int(retries.Load()), "every attempt but the last is reported")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A push the server refuses (a hook that declines it, a branch checked out in a non-bare
// repository) is tried refusalAttempts times, not to the deadline. A lost race is retried to the
// deadline (TestUpdateRace).
func TestUpdateRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server func(t *testing.T, dir string) string // returns the repository path
		reason string
	}{
		{"hook declines", func(t *testing.T, dir string) string {
			bare := newBare(t, dir, "repo.git", map[string]string{"a.txt": "a\n"})
			hook := filepath.Join(bare, "hooks", "pre-receive")
			require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\necho rejected by policy >&2\nexit 1\n"), 0o755))
			return bare
		}, "pre-receive hook declined"},
		{"branch checked out", func(t *testing.T, dir string) string {
			bare := newBare(t, dir, "repo.git", map[string]string{"a.txt": "a\n"})
			work := filepath.Join(dir, "work")
			gitOut(t, dir, "clone", "-q", bare, work)
			return work
		}, "checked out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := tc.server(t, t.TempDir())
			before := gitOut(t, repo, "rev-parse", "main")
			retries := 0
			remote, err := NewRemote(RemoteConfig{URL: "file://" + repo,
				OnRetry: func(int, error, time.Duration) { retries++ }})
			require.NoError(t, err)
			res, err := remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "m",
				Change:   func(*Snapshot) (map[string][]byte, error) { return map[string][]byte{"a.txt": []byte("b\n")}, nil },
				Deadline: time.Now().Add(time.Minute)})
			var rej *RejectedError
			require.ErrorAs(t, err, &rej)
			assert.Contains(t, err.Error(), tc.reason)
			assert.Equal(t, refusalAttempts, res.Attempts)
			assert.Equal(t, refusalAttempts-1, retries)
			assert.Equal(t, before, gitOut(t, repo, "rev-parse", "main"), "branch moved")
		})
	}
}

func TestUpdateSigned(t *testing.T) {
	dir := t.TempDir()
	bare := newBare(t, dir, "repo.git", map[string]string{"a.txt": "a\n"})
	ent, err := openpgp.NewEntity("Auditor Bot", "", "auditor@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var key bytes.Buffer
	aw, err := armor.Encode(&key, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ent.SerializePrivate(aw, nil); err != nil {
		t.Fatal(err)
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key.asc")
	if err := os.WriteFile(keyFile, key.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	remote, err := NewRemote(RemoteConfig{URL: "file://" + bare, SignKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	res, err := remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "signed",
		Change: func(*Snapshot) (map[string][]byte, error) { return map[string][]byte{"a.txt": []byte("b\n")}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	fsck(t, bare)
	raw := gitOut(t, bare, "cat-file", "commit", res.Commit)
	if !strings.Contains(raw, "gpgsig -----BEGIN PGP SIGNATURE-----") {
		t.Fatalf("no signature:\n%s", raw)
	}
	c, err := remote.repo.CommitObject(plumbing.NewHash(res.Commit))
	if err != nil {
		t.Fatal(err)
	}
	var pub bytes.Buffer
	pw, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ent.Serialize(pw); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(pub.String()); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// A dry run builds each commit as Update would and pushes none; the next one builds on the last.
func TestUpdateDryRun(t *testing.T) {
	bare := newBare(t, t.TempDir(), "repo.git", map[string]string{"a.txt": "a\n"})
	before := gitOut(t, bare, "rev-parse", "main")
	remote, err := NewRemote(RemoteConfig{URL: "file://" + bare, DryRun: true})
	require.NoError(t, err)
	write := func(content string) Result {
		res, err := remote.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: "m",
			Change: func(s *Snapshot) (map[string][]byte, error) {
				return map[string][]byte{"a.txt": append(s.Files["a.txt"], content...)}, nil
			}})
		require.NoError(t, err)
		return res
	}
	first := write("b\n")
	assert.True(t, first.DryRun)
	assert.Equal(t, before, first.Parent)
	assert.NotEmpty(t, first.Commit)
	second := write("c\n")
	assert.Equal(t, first.Commit, second.Parent, "the second dry commit builds on the first")
	assert.Equal(t, before, gitOut(t, bare, "rev-parse", "main"), "a dry run pushed")
}
