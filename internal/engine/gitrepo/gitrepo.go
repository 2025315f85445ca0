// Package gitrepo reads the GitOps repository: a tree at a revision without a checkout, the
// history of paths, and (in later files) commits, pushes with retry and reverts.
package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Repo is an opened Git repository, on disk or cloned into memory. It is safe for concurrent
// use. A clone on disk is fetched beside its readers: the fetch writes through a storage of its
// own and the new refs are published at its end, so a stalled server holds up no read. A clone
// in memory is fetched under a write lock (its store cannot be shared).
type Repo struct {
	repo     *git.Repository
	location string
	remote   bool                 // cloned into memory from location
	auth     transport.AuthMethod // credentials for Fetch (nil: none)
	// creds, when set, reads the credentials anew from their files at every Fetch (a rotated
	// token is used from the next fetch on); auth is then what the clone used.
	creds func() (transport.AuthMethod, error)
	// mu serialises every use of the storage, reads too (shared with the Snapshots read from
	// it): go-git's storage is not safe for concurrent use (on disk, it loads pack indexes lazily).
	mu *sync.Mutex

	dir     string          // a clone on disk: its directory
	fetchMu sync.Mutex      // one fetch at a time
	fetcher *git.Repository // a clone on disk: the storage fetches write through
}

// Snapshot is the content of a tree at one commit.
type Snapshot struct {
	// Revision is the full commit hash the snapshot was read from.
	Revision string
	// Files maps slash-separated paths to file contents (regular files only).
	Files map[string][]byte
	// Omitted are the files larger than MaxFileSize, with their sizes: left out of Files, as no
	// manifest is that large and reading them would put a binary committed to the repository in
	// memory at every snapshot. A render that reads one fails, naming it.
	Omitted map[string]int64
	// Symlinks are the paths Git records as symbolic links (mode 120000), without their content
	// or target: a snapshot holds none of them, yet Argo CD's repo-server follows one to a file
	// of the repository. A render that would read one says so rather than render part.
	Symlinks map[string]bool
	// WorkTree is, for a snapshot of a work tree (Repo.WorkTree; Revision empty), its directory;
	// Parent the commit HEAD names there ("" before the first commit), the history it sits on;
	// Changed the paths that differ from HEAD's tree; Staged those whose staged content is
	// neither HEAD's nor the disk's (a commit would take content the snapshot does not hold).
	WorkTree, Parent string
	Changed, Staged  []string

	repo *git.Repository // for Log; nil in snapshots built by hand
	mu   *sync.Mutex     // the Repo's, when it has one
}

// Open opens a repository: a local directory (any subdirectory of a work tree, or a bare repo),
// or a URL (file://, https://, ssh://), which is cloned into memory.
func Open(location string) (*Repo, error) {
	if IsURL(location) {
		return openURL(context.Background(), location, nil, "")
	}
	r, err := git.PlainOpenWithOptions(location, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true}) // a git worktree too
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", location, err)
	}
	return &Repo{repo: r, location: location, mu: &sync.Mutex{}}, nil
}

// scpLike is Git's scp-like remote syntax, user@host:path.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:[^\\]`)

// IsURL reports whether a repository location is remote: a URL (file://, https://, ssh://) or
// Git's scp-like user@host:path; anything else is a local directory.
func IsURL(location string) bool {
	return strings.Contains(location, "://") || scpLike.MatchString(location)
}

// Resolve turns a revision (branch, tag, short or full hash, HEAD~1) into a commit hash.
func (r *Repo) Resolve(rev string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolve(rev)
}

func (r *Repo) resolve(rev string) (string, error) {
	if rev == "" {
		rev = "HEAD"
		if _, err := r.repo.Head(); err != nil { // a fetched repository has no HEAD: use main
			rev = "main"
		}
	}
	if r.remote {
		// A clone's branches are its remote-tracking ones: a local branch of the same name is
		// what a write left behind, not what the remote has now.
		if h, err := r.repo.ResolveRevision(plumbing.Revision("refs/remotes/origin/" + rev)); err == nil {
			return h.String(), nil
		}
		// The remote's HEAD (Argo CD's default targetRevision) is not fetched: HEAD, HEAD~N and
		// HEAD^ read main.
		if after, ok := strings.CutPrefix(rev, "HEAD"); ok && (after == "" || strings.ContainsAny(after[:1], "~^")) {
			if _, err := r.repo.Head(); err != nil {
				rev = "refs/remotes/origin/main" + after
			}
		}
	}
	h, err := r.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return "", &RevisionError{Rev: rev, Location: redactURL(r.location), Err: err}
	}
	return h.String(), nil
}

// RevisionError is a revision a repository does not have, or that does not parse: every
// command says it in these words; go-git's own (ErrReferenceNotFound, a parse error) is kept
// for errors.Is only.
type RevisionError struct {
	Rev, Location string
	Err           error
}

func (e *RevisionError) Error() string {
	return fmt.Sprintf("revision %q not found in %s", e.Rev, e.Location)
}

// Unwrap is go-git's error.
func (e *RevisionError) Unwrap() error { return e.Err }

// Snapshot reads every regular file of the tree at rev.
func (r *Repo) Snapshot(rev string) (*Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hash, err := r.resolve(rev)
	if err != nil {
		return nil, err
	}
	snap, err := snapshotOf(r.repo, plumbing.NewHash(hash), MaxFileSize)
	if snap != nil {
		snap.mu = r.mu
	}
	return snap, err
}

// snapshotOf reads every regular file of the tree of commit hash, leaving out those larger than
// limit (0: none).
func snapshotOf(repo *git.Repository, h plumbing.Hash, limit int64) (*Snapshot, error) {
	hash := h.String()
	commit, err := repo.CommitObject(h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", hash, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", hash, err)
	}
	snap := &Snapshot{Revision: hash, Files: map[string][]byte{}, repo: repo}
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("walk tree of %s: %w", hash, err)
		}
		if entry.Mode == filemode.Symlink {
			snap.addSymlink(name)
			continue
		}
		if !entry.Mode.IsFile() {
			continue
		}
		if err := readFile(repo, snap, name, entry.Hash, nil, limit); err != nil {
			return nil, fmt.Errorf("read %s at %s: %w", name, hash, err)
		}
	}
	return snap, nil
}

// addSymlink records name as a symlink of the tree, left out of Files.
func (s *Snapshot) addSymlink(name string) {
	if s.Symlinks == nil {
		s.Symlinks = map[string]bool{}
	}
	s.Symlinks[name] = true
}

func readBlob(b *object.Blob) ([]byte, error) {
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}

// IsAncestor reports whether commit ancestor is reachable from commit descendant (a commit is its
// own ancestor): Git at descendant has moved on from ancestor rather than elsewhere.
func (r *Repo) IsAncestor(ancestor, descendant string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, err := r.repo.CommitObject(plumbing.NewHash(ancestor))
	if err != nil {
		return false, fmt.Errorf("commit %.12s: %w", ancestor, err)
	}
	d, err := r.repo.CommitObject(plumbing.NewHash(descendant))
	if err != nil {
		return false, fmt.Errorf("commit %.12s: %w", descendant, err)
	}
	return a.IsAncestor(d)
}

// MaxFileSize is the largest file a snapshot read for rendering holds (Snapshot.Omitted lists
// the others; File reads them). The snapshots Remote.Update edits hold every file.
const MaxFileSize = 8 << 20

// File returns a file of the snapshot: from Files, or, when it was omitted for its size, read
// from the repository in full. ok is false when the snapshot has no such file. Data files that
// grow without bound (the model ledger) are read through it, never through Files.
func (s *Snapshot) File(name string) (data []byte, ok bool, err error) {
	if data, ok := s.Files[name]; ok {
		return data, true, nil
	}
	if _, omitted := s.Omitted[name]; !omitted {
		return nil, false, nil
	}
	if s.repo == nil {
		return nil, false, fmt.Errorf("read %s at %s: omitted and no repository", name, s.Revision)
	}
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	c, err := s.repo.CommitObject(plumbing.NewHash(s.Revision))
	if err != nil {
		return nil, false, fmt.Errorf("read %s at %s: %w", name, s.Revision, err)
	}
	f, err := c.File(name)
	if err != nil {
		return nil, false, fmt.Errorf("read %s at %s: %w", name, s.Revision, err)
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, false, fmt.Errorf("read %s at %s: %w", name, s.Revision, err)
	}
	defer rd.Close()
	data, err = io.ReadAll(rd)
	if err != nil {
		return nil, false, fmt.Errorf("read %s at %s: %w", name, s.Revision, err)
	}
	return data, true, nil
}

// readFile reads a regular file's blob into snap, or records it as omitted when it is larger
// than limit (0: no limit; the size comes from the object's header, nothing is inflated).
func readFile(repo *git.Repository, snap *Snapshot, name string, h plumbing.Hash, cached map[plumbing.Hash][]byte, limit int64) error {
	if data, ok := cached[h]; ok {
		snap.Files[name] = data
		return nil
	}
	blob, err := repo.BlobObject(h)
	if err != nil {
		return err
	}
	if limit > 0 && blob.Size > limit {
		if snap.Omitted == nil {
			snap.Omitted = map[string]int64{}
		}
		snap.Omitted[name] = blob.Size
		return nil
	}
	data, err := readBlob(blob)
	if err != nil {
		return err
	}
	if cached != nil {
		cached[h] = data
	}
	snap.Files[name] = data
	return nil
}

// Short abbreviates a commit SHA to 12 hex digits, as people quote it.
func Short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
