package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// ChangeFunc computes the changes to make on the branch head: path → new content, a nil value
// deletes the file. It is called again on the new head after every lost race, so it must derive
// the changes from s (never from an earlier call). No changes (or changes equal to the head's
// content) means no commit. An error aborts the update and is returned as is (wrapped).
type ChangeFunc func(s *Snapshot) (map[string][]byte, error)

// Backoff is the retry schedule: Initial, doubled (Multiplier) up to Max, each sleep randomised
// ("full jitter": uniformly in [d/2, d]).
type Backoff struct {
	Initial    time.Duration // default 100ms
	Max        time.Duration // default 5s
	Multiplier float64       // default 2
}

// UpdateRequest describes one commit to make on a branch.
type UpdateRequest struct {
	Branch string
	// Author is the author and committer of the commit (When is ignored: the time of the attempt
	// is used).
	Author Person
	// Message is the commit message; Trailers are appended after a blank line as `Key: value`.
	Message  string
	Trailers []Trailer
	Change   ChangeFunc
	// Deadline bounds the retries (zero: the context's deadline, else one minute from now).
	Deadline time.Time
	Backoff  Backoff
	// CreateBranch allows creating the branch (with a root commit when the remote has no such
	// branch). Without it a missing branch is an error.
	CreateBranch bool
}

// Result is the outcome of a successful Update or Revert.
type Result struct {
	// Commit is the pushed commit (empty when NoChange).
	Commit string
	// Parent is the branch head the final attempt started from (empty for a new branch).
	Parent string
	// Attempts counts the attempts (1 when the first push succeeded).
	Attempts int
	// NoChange is true when the change was already in place: nothing was committed.
	NoChange bool
}

// PushError is returned when the deadline (or the context) ended the retries: the change is
// not on the branch (unless a final push succeeded on the server without confirmation).
type PushError struct {
	Branch   string
	Attempts int
	Last     error // the error of the last attempt
}

func (e *PushError) Error() string {
	return fmt.Sprintf("push to branch %s gave up after %d attempt(s): %v", e.Branch, e.Attempts, e.Last)
}

func (e *PushError) Unwrap() error { return e.Last }

// ErrBranchNotFound is returned when the branch does not exist and CreateBranch is false.
var ErrBranchNotFound = errors.New("branch not found on remote")

// permanentError marks an attempt error that is not retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Update commits the changes computed by req.Change on the head of req.Branch and pushes the
// commit, recomputing the changes on the new head and retrying with backoff when the push
// loses a race (or fails transiently) until req.Deadline. Errors: *AuthError for refused
// credentials, the Change error, ErrBranchNotFound, or *PushError when the deadline passed.
func (r *Remote) Update(ctx context.Context, req UpdateRequest) (Result, error) {
	if req.Change == nil {
		return Result{}, errors.New("update: nil Change")
	}
	return r.update(ctx, &req, func(repo *git.Repository, head *object.Commit) (*object.Tree, map[string][]byte, error) {
		var snap *Snapshot
		var tree *object.Tree
		if head == nil {
			snap = &Snapshot{Files: map[string][]byte{}, repo: repo}
		} else {
			var err error
			if snap, err = snapshotOf(repo, head.Hash); err != nil {
				return nil, nil, err
			}
			if tree, err = head.Tree(); err != nil {
				return nil, nil, err
			}
		}
		changes, err := req.Change(snap)
		if err != nil {
			return nil, nil, &permanentError{fmt.Errorf("change: %w", err)}
		}
		return tree, changes, nil
	})
}

// computeFunc returns the base tree (nil for none) and the changes to apply for one attempt.
type computeFunc func(repo *git.Repository, head *object.Commit) (*object.Tree, map[string][]byte, error)

// update runs the attempt loop; compute may set req.Message (read after each compute).
func (r *Remote) update(ctx context.Context, req *UpdateRequest, compute computeFunc) (Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if req.Branch == "" || strings.ContainsAny(req.Branch, " ~^:?*[\\") {
		return Result{}, fmt.Errorf("update: invalid branch %q", req.Branch)
	}
	if req.Author.Name == "" || req.Author.Email == "" {
		return Result{}, errors.New("update: author name and email are required")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	auth, err := r.auth()
	if err != nil {
		return Result{}, err
	}
	signer, err := r.signer()
	if err != nil {
		return Result{}, err
	}
	deadline := req.Deadline
	if deadline.IsZero() {
		if d, ok := ctx.Deadline(); ok {
			deadline = d
		} else {
			deadline = time.Now().Add(time.Minute)
		}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	b := req.Backoff
	if b.Initial <= 0 {
		b.Initial = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 5 * time.Second
	}
	if b.Multiplier < 1 {
		b.Multiplier = 2
	}
	delay := b.Initial
	var res Result
	var last error // the last error not caused by the deadline itself
	giveUp := func(err error) error {
		if last == nil || ctx.Err() == nil {
			last = err
		}
		return &PushError{Branch: req.Branch, Attempts: res.Attempts, Last: last}
	}
	for {
		res.Attempts++
		var commit, parent string
		commit, parent, err = r.attempt(ctx, auth, signer, req, compute)
		if err == nil {
			res.Parent = parent
			if commit == "" {
				res.NoChange = true
			}
			res.Commit = commit
			return res, nil
		}
		var perm *permanentError
		var authErr *AuthError
		switch {
		case errors.As(err, &authErr):
			return res, authErr
		case errors.As(err, &perm):
			return res, perm.err
		}
		// Context ended (deadline or cancel): give up with the last real error.
		if ctx.Err() != nil {
			return res, giveUp(err)
		}
		last = err
		sleep := delay/2 + time.Duration(rand.Int64N(int64(delay/2)+1))
		if time.Now().Add(sleep).After(deadline) {
			return res, giveUp(err)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, giveUp(err)
		case <-t.C:
		}
		delay = time.Duration(float64(delay) * b.Multiplier)
		if delay > b.Max {
			delay = b.Max
		}
	}
}

// attempt fetches the branch, computes the changes, commits and pushes once. It returns the
// new commit ("" when there is nothing to commit) and the head it built on.
func (r *Remote) attempt(ctx context.Context, auth transport.AuthMethod, signer *openpgp.Entity,
	req *UpdateRequest, compute computeFunc) (string, string, error) {
	repo, err := r.cached()
	if err != nil {
		return "", "", err
	}
	tracking := plumbing.NewRemoteReferenceName("origin", req.Branch)
	local := plumbing.NewBranchReferenceName(req.Branch)
	spec := config.RefSpec(fmt.Sprintf("+%s:%s", local, tracking))
	err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: auth, RefSpecs: []config.RefSpec{spec}})
	missing := false
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
	case errors.Is(err, transport.ErrEmptyRemoteRepository), isNoMatchingRef(err):
		missing = true
	case isAuthErr(err):
		return "", "", &AuthError{URL: redactURL(r.cfg.URL), Err: err}
	default:
		return "", "", fmt.Errorf("fetch %s: %w", redactURL(r.cfg.URL), err)
	}
	var head *object.Commit
	if missing {
		if !req.CreateBranch {
			return "", "", &permanentError{fmt.Errorf("%w: %s in %s", ErrBranchNotFound, req.Branch, redactURL(r.cfg.URL))}
		}
		_ = repo.Storer.RemoveReference(tracking)
	} else {
		ref, err := repo.Reference(tracking, true)
		if err != nil {
			return "", "", fmt.Errorf("read fetched %s: %w", tracking, err)
		}
		if head, err = repo.CommitObject(ref.Hash()); err != nil {
			return "", "", fmt.Errorf("read head %s: %w", ref.Hash(), err)
		}
	}
	parent := ""
	if head != nil {
		parent = head.Hash.String()
	}
	base, changes, err := compute(repo, head)
	if err != nil {
		return "", parent, err
	}
	if len(changes) == 0 {
		return "", parent, nil
	}
	treeHash, err := buildTree(repo.Storer, base, changes)
	if err != nil {
		return "", parent, &permanentError{err}
	}
	if base != nil && treeHash == base.Hash {
		return "", parent, nil
	}
	now := time.Now()
	sig := object.Signature{Name: req.Author.Name, Email: req.Author.Email, When: now}
	c := &object.Commit{Author: sig, Committer: sig, Message: renderMessage(req.Message, req.Trailers), TreeHash: treeHash}
	if head != nil {
		c.ParentHashes = []plumbing.Hash{head.Hash}
	}
	if signer != nil {
		if err := signCommit(c, signer); err != nil {
			return "", parent, &permanentError{err}
		}
	}
	obj := repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return "", parent, &permanentError{err}
	}
	hash, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return "", parent, &permanentError{err}
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(local, hash)); err != nil {
		return "", parent, &permanentError{err}
	}
	err = repo.PushContext(ctx, &git.PushOptions{RemoteName: "origin", Auth: auth,
		RefSpecs: []config.RefSpec{config.RefSpec(fmt.Sprintf("%s:%s", local, local))}})
	switch {
	case err == nil:
	case isAuthErr(err):
		return "", parent, &AuthError{URL: redactURL(r.cfg.URL), Err: err}
	default:
		return "", parent, fmt.Errorf("push %s to %s: %w", req.Branch, redactURL(r.cfg.URL), err)
	}
	_ = repo.Storer.SetReference(plumbing.NewHashReference(tracking, hash))
	return hash.String(), parent, nil
}

func isNoMatchingRef(err error) bool {
	var nm git.NoMatchingRefSpecError
	return errors.As(err, &nm) || strings.Contains(err.Error(), "couldn't find remote ref")
}

// cached returns the in-memory clone kept between calls.
func (r *Remote) cached() (*git.Repository, error) {
	if r.repo != nil {
		return r.repo, nil
	}
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		return nil, err
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{r.cfg.URL}}); err != nil {
		return nil, err
	}
	r.repo = repo
	return repo, nil
}

func signCommit(c *object.Commit, signer *openpgp.Entity) error {
	enc := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(enc); err != nil {
		return err
	}
	rd, err := enc.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, signer, rd, nil); err != nil {
		return fmt.Errorf("sign commit: %w", err)
	}
	c.PGPSignature = sig.String()
	return nil
}

// buildTree writes the tree of base with changes applied (nil content deletes) and returns
// its hash. Modes of existing files are kept; new files are regular (0644).
func buildTree(s storer.EncodedObjectStorer, base *object.Tree, changes map[string][]byte) (plumbing.Hash, error) {
	norm := map[string][]byte{}
	for p, c := range changes {
		q := strings.Trim(p, "/")
		if q == "" || strings.Contains(q, "//") || strings.HasPrefix(q, "../") || strings.Contains(q, "/../") ||
			q == ".." || strings.HasPrefix(q, "./") || strings.HasPrefix(q, ".git/") || q == ".git" {
			return plumbing.ZeroHash, fmt.Errorf("invalid path %q", p)
		}
		norm[q] = c
	}
	return writeTree(s, base, norm)
}

func writeTree(s storer.EncodedObjectStorer, base *object.Tree, changes map[string][]byte) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if base != nil {
		for _, e := range base.Entries {
			entries[e.Name] = e
		}
	}
	sub := map[string]map[string][]byte{}
	for p, content := range changes {
		dir, rest, nested := strings.Cut(p, "/")
		if nested {
			if sub[dir] == nil {
				sub[dir] = map[string][]byte{}
			}
			sub[dir][rest] = content
			continue
		}
		if content == nil {
			if e, ok := entries[p]; ok && e.Mode != filemode.Dir {
				delete(entries, p)
			}
			continue
		}
		obj := s.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		obj.SetSize(int64(len(content)))
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(content); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := s.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mode := filemode.Regular
		if e, ok := entries[p]; ok {
			if e.Mode == filemode.Dir {
				return plumbing.ZeroHash, fmt.Errorf("cannot write file %s: a directory exists there", p)
			}
			if e.Mode == filemode.Executable {
				mode = e.Mode
			}
		}
		entries[p] = object.TreeEntry{Name: p, Mode: mode, Hash: h}
	}
	for dir, ch := range sub {
		var subBase *object.Tree
		if e, ok := entries[dir]; ok {
			if e.Mode != filemode.Dir {
				allDeletes := true
				for _, c := range ch {
					allDeletes = allDeletes && c == nil
				}
				if allDeletes {
					continue
				}
				return plumbing.ZeroHash, fmt.Errorf("cannot create directory %s: a file exists there", dir)
			}
			t, err := object.GetTree(s, e.Hash)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			subBase = t
		}
		h, err := writeTree(s, subBase, ch)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if h == emptyTree {
			delete(entries, dir)
			continue
		}
		entries[dir] = object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h}
	}
	list := make([]object.TreeEntry, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	// Git orders entries by name, a directory compared as if its name ended with "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
	t := &object.Tree{Entries: list}
	obj := s.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// emptyTree is the hash of the empty tree.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
