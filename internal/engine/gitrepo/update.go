package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/util/wait"
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
	// Onto, when set, is the branch the commit is made on (its head is the parent) while it is
	// pushed to Branch, a new branch for review: a Branch the remote has already is refused
	// (ErrBranchExists), never replaced. Onto must exist.
	Onto string
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
	// DryRun is true when the Remote is a dry run: Commit was built but not pushed.
	DryRun bool
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

// ErrBranchExists is returned when UpdateRequest.Onto asks for a new Branch the remote has.
var ErrBranchExists = errors.New("branch exists on remote")

// permanentError marks an attempt error that is not retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

func (e *permanentError) Unwrap() error { return e.err }

// Update commits the changes computed by req.Change on the head of req.Branch and pushes the
// commit, recomputing the changes on the new head and retrying with backoff when the push
// loses a race (or fails transiently) until req.Deadline. Errors: *AuthError for refused
// credentials, *RejectedError for a push the server refused, the Change error,
// ErrBranchNotFound, or *PushError when the deadline passed.
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
			if snap, err = snapshotOf(repo, head.Hash, 0); err != nil { // every file: edits lose nothing
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
	if err := checkUpdate(req); err != nil {
		return Result{}, err
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
	deadline := updateDeadline(ctx, req.Deadline)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	b := req.Backoff.withDefaults()
	// Each sleep is drawn from [d/2, d), d doubling from Initial up to Max: wait.Backoff jitters
	// upwards only, so it steps half the delays with a jitter of 1.
	steps := wait.Backoff{Duration: b.Initial / 2, Factor: b.Multiplier, Jitter: 1, Cap: b.Max / 2, Steps: math.MaxInt32}
	var res Result
	var last error // the last error not caused by the deadline itself
	refusals := 0  // attempts the server refused (RejectedError)
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
			return r.succeeded(res, commit, parent), nil
		}
		var perm *permanentError
		var authErr *AuthError
		var rejected *RejectedError
		switch {
		case errors.As(err, &authErr):
			return res, authErr
		case errors.As(err, &perm):
			return res, perm.err
		case errors.As(err, &rejected):
			if refusals++; refusals >= refusalAttempts {
				return res, rejected
			}
		}
		// Context ended (deadline or cancel): give up with the last real error.
		if ctx.Err() != nil {
			return res, giveUp(err)
		}
		last = err
		sleep := steps.Step()
		if time.Now().Add(sleep).After(deadline) {
			return res, giveUp(err)
		}
		if r.cfg.OnRetry != nil {
			r.cfg.OnRetry(res.Attempts, err, sleep)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, giveUp(err)
		case <-t.C:
		}
	}
}

// succeeded is res of an update whose attempt made commit on parent (none: nothing to change).
func (r *Remote) succeeded(res Result, commit, parent string) Result {
	res.Parent = parent
	if commit == "" {
		res.NoChange = true
	}
	res.Commit = commit
	res.DryRun = r.cfg.DryRun
	return res
}

// checkUpdate says what req lacks: a valid branch name, an author's name and email.
func checkUpdate(req *UpdateRequest) error {
	if req.Branch == "" || strings.ContainsAny(req.Branch, " ~^:?*[\\") {
		return fmt.Errorf("update: invalid branch %q", req.Branch)
	}
	if req.Author.Name == "" || req.Author.Email == "" {
		return errors.New("update: author name and email are required")
	}
	return nil
}

// updateDeadline is deadline, or when it is zero ctx's deadline, or without one a minute from now.
func updateDeadline(ctx context.Context, deadline time.Time) time.Time {
	if deadline.IsZero() {
		if d, ok := ctx.Deadline(); ok {
			deadline = d
		} else {
			deadline = time.Now().Add(time.Minute)
		}
	}
	return deadline
}

// withDefaults fills what b leaves unset: 100 ms initial, 5 s at most, doubling.
func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 5 * time.Second
	}
	if b.Multiplier < 1 {
		b.Multiplier = 2
	}
	return b
}
