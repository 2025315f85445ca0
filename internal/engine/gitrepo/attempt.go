package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// attempt fetches the branch, computes the changes, commits and pushes once. It returns the
// new commit ("" when there is nothing to commit) and the head it built on.
func (r *Remote) attempt(ctx context.Context, auth transport.AuthMethod, signer *openpgp.Entity,
	req *UpdateRequest, compute computeFunc) (string, string, error) {
	repo, err := r.cached()
	if err != nil {
		return "", "", err
	}
	onto, fork := req.Branch, req.Onto != "" && req.Onto != req.Branch
	if fork {
		onto = req.Onto
		// The new branch is made, never replaced: one that exists may hold a reviewer's work.
		if exists, err := r.hasBranch(ctx, repo, auth, req.Branch); err != nil {
			return "", "", err
		} else if exists {
			return "", "", &permanentError{fmt.Errorf("%w: %s in %s", ErrBranchExists, req.Branch, redactURL(r.cfg.URL))}
		}
	}
	tracking := plumbing.NewRemoteReferenceName("origin", onto)
	local := plumbing.NewBranchReferenceName(req.Branch)
	spec := config.RefSpec(fmt.Sprintf("+%s:%s", plumbing.NewBranchReferenceName(onto), tracking))
	missing, err := r.fetchSpec(ctx, repo, auth, spec)
	if err != nil {
		return "", "", err
	}
	var head *object.Commit
	if missing {
		if !req.CreateBranch || fork {
			return "", "", &permanentError{fmt.Errorf("%w: %s in %s", ErrBranchNotFound, onto, redactURL(r.cfg.URL))}
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
	if h, ok := r.dry[req.Branch]; ok { // a dry run goes on from its own last commit
		if head, err = repo.CommitObject(h); err != nil {
			return "", "", &permanentError{fmt.Errorf("read dry-run commit %s: %w", h, err)}
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
	hash, err := writeCommit(repo, req, treeHash, head, signer)
	if err != nil {
		return "", parent, err
	}
	if r.cfg.DryRun {
		r.recordDry(req.Branch, hash)
		return hash.String(), parent, nil
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(local, hash)); err != nil {
		return "", parent, &permanentError{err}
	}
	if err := r.pushBranch(ctx, repo, auth, local, req.Branch); err != nil {
		return "", parent, err
	}
	_ = repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewRemoteReferenceName("origin", req.Branch), hash))
	return hash.String(), parent, nil
}

// recordDry records hash as the dry run's last commit on branch, which the next attempt goes on from.
func (r *Remote) recordDry(branch string, hash plumbing.Hash) {
	if r.dry == nil {
		r.dry = map[string]plumbing.Hash{}
	}
	r.dry[branch] = hash
}

// fetchSpec fetches spec from origin, saying whether the branch it names is missing there.
func (r *Remote) fetchSpec(ctx context.Context, repo *git.Repository, auth transport.AuthMethod, spec config.RefSpec) (bool, error) {
	err := repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: auth, RefSpecs: []config.RefSpec{spec}})
	missing := false
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
	case errors.Is(err, transport.ErrEmptyRemoteRepository), isNoMatchingRef(err):
		missing = true
	case isAuthErr(err):
		return false, &AuthError{URL: redactURL(r.cfg.URL), Err: err}
	default:
		return false, fmt.Errorf("fetch %s: %w", redactURL(r.cfg.URL), err)
	}
	return missing, nil
}

// writeCommit stores in repo the commit of req's author and message with tree treeHash, on head
// (none: a root commit), signed by signer if there is one; its errors are permanent.
func writeCommit(repo *git.Repository, req *UpdateRequest, treeHash plumbing.Hash, head *object.Commit, signer *openpgp.Entity) (plumbing.Hash, error) {
	now := time.Now()
	sig := object.Signature{Name: req.Author.Name, Email: req.Author.Email, When: now}
	c := &object.Commit{Author: sig, Committer: sig, Message: renderMessage(req.Message, req.Trailers), TreeHash: treeHash}
	if head != nil {
		c.ParentHashes = []plumbing.Hash{head.Hash}
	}
	if signer != nil {
		if err := signCommit(c, signer); err != nil {
			return plumbing.ZeroHash, &permanentError{err}
		}
	}
	obj := repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, &permanentError{err}
	}
	hash, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, &permanentError{err}
	}
	return hash, nil
}

// pushBranch pushes local to origin, an error saying whether the server refused it or the
// credentials.
func (r *Remote) pushBranch(ctx context.Context, repo *git.Repository, auth transport.AuthMethod, local plumbing.ReferenceName, branch string) error {
	err := repo.PushContext(ctx, &git.PushOptions{RemoteName: "origin", Auth: auth,
		RefSpecs: []config.RefSpec{config.RefSpec(fmt.Sprintf("%s:%s", local, local))}})
	switch {
	case err == nil:
	case isAuthErr(err):
		return &AuthError{URL: redactURL(r.cfg.URL), Err: err}
	case refused(err):
		return &RejectedError{Branch: branch, URL: redactURL(r.cfg.URL), Err: err}
	default:
		return fmt.Errorf("push %s to %s: %w", branch, redactURL(r.cfg.URL), err)
	}
	return nil
}

// RejectedError reports that the server refused the push for a reason that does not look like
// a lost race: a hook declined it, the branch is protected or checked out in a non-bare
// repository, the server could not store the objects. Update tries a refused push
// refusalAttempts times (a hook can fail for a moment: GitLab's read-only storage moves, an
// internal API error) and then returns it, instead of retrying to the deadline.
type RejectedError struct {
	Branch string
	URL    string // with any user info removed
	Err    error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("push %s to %s: the server refused it: %v", e.Branch, e.URL, e.Err)
}

func (e *RejectedError) Unwrap() error { return e.Err }

// refusalAttempts is how many times a refused push is tried.
const refusalAttempts = 3

// refused tells whether a push error is the server's refusal of the update for a reason known
// not to be a race: its report-status line for the ref names a hook, a protection or a
// checked-out branch, or the objects were not unpacked. Any other reason (git's "cannot lock
// ref", "incorrect old value provided", "reference already exists", "failed to update ref") is
// a lost race or a fault of the moment, retried to the deadline.
func refused(err error) bool {
	msg := strings.ToLower(err.Error())
	if strings.HasPrefix(msg, "unpack error: ") {
		return true
	}
	i := strings.Index(msg, "command error on ")
	if i < 0 {
		return false
	}
	reason := msg[i:]
	for _, permanent := range []string{"hook declined", "protected branch", "checked out", "shallow update not allowed",
		"deny updating", "denying", "refusing", "not allowed", "permission"} {
		if strings.Contains(reason, permanent) {
			return true
		}
	}
	return false
}

func isNoMatchingRef(err error) bool {
	var nm git.NoMatchingRefSpecError
	return errors.As(err, &nm) || strings.Contains(err.Error(), "couldn't find remote ref")
}

// cached returns the clone kept between calls (in Dir, or memory).
func (r *Remote) cached() (*git.Repository, error) {
	if r.repo != nil {
		return r.repo, nil
	}
	location, _ := withoutUserinfo(r.cfg.URL, nil) // the credentials come from auth, not the config on disk
	repo, err := cloneStorage(location, r.cfg.Dir)
	if err != nil {
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

// hasBranch says whether the remote has branch now.
func (r *Remote) hasBranch(ctx context.Context, repo *git.Repository, auth transport.AuthMethod, branch string) (bool, error) {
	remote, err := repo.Remote("origin")
	if err != nil {
		return false, err
	}
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	switch {
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return false, nil
	case isAuthErr(err):
		return false, &AuthError{URL: redactURL(r.cfg.URL), Err: err}
	case err != nil:
		return false, fmt.Errorf("list the branches of %s: %w", redactURL(r.cfg.URL), err)
	}
	name := plumbing.NewBranchReferenceName(branch)
	for _, ref := range refs {
		if ref.Name() == name {
			return true, nil
		}
	}
	return false, nil
}
