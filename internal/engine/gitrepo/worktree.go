package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// ErrNoWorkTree is WorkTree's error for a repository without one: a bare repository, or one
// cloned from a URL into memory.
var ErrNoWorkTree = errors.New("the repository has no work tree")

// WorkTree reads the work tree as `git diff HEAD` sees it: every path Git tracks (the index), as
// it is on disk now, staged or not; a tracked file deleted on disk is left out. Files Git does not
// track are not read, as a commit would not hold them (`git add` them first). The snapshot's
// Revision is empty and its Parent is the commit HEAD names; Changed lists the paths that differ
// from HEAD's tree (none: the work tree is HEAD's).
func (r *Repo) WorkTree() (*Snapshot, error) {
	if r.remote {
		return nil, ErrNoWorkTree
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	wt, err := r.repo.Worktree()
	if errors.Is(err, git.ErrIsBareRepository) {
		return nil, ErrNoWorkTree
	}
	if err != nil {
		return nil, fmt.Errorf("work tree of %s: %w", r.location, err)
	}
	root := wt.Filesystem.Root()
	idx, err := r.repo.Storer.Index()
	if err != nil {
		return nil, fmt.Errorf("read the index of %s: %w", root, err)
	}
	snap := &Snapshot{Files: map[string][]byte{}, WorkTree: root}
	staged := map[string]plumbing.Hash{} // what a commit would take of each path read from disk
	for _, e := range idx.Entries {
		if e.Mode == filemode.Symlink {
			snap.addSymlink(e.Name) // the snapshot holds its name only, as a commit's does
			continue
		}
		if e.Mode == filemode.Submodule || !e.Mode.IsFile() {
			continue
		}
		if _, seen := snap.Files[e.Name]; seen { // a conflict's stages: the disk holds its markers
			continue
		}
		if e.SkipWorktree { // a sparse checkout leaves it off the disk: the index has it
			if err := readFile(r.repo, snap, e.Name, e.Hash, nil, MaxFileSize); err != nil {
				return nil, fmt.Errorf("work tree: read %s from the index: %w", e.Name, err)
			}
			continue
		}
		if e.Stage == 0 {
			staged[e.Name] = e.Hash
		}
		p := filepath.Join(root, filepath.FromSlash(e.Name))
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted on disk: the commit would not hold it either (git commit -a)
		}
		if err != nil {
			return nil, fmt.Errorf("work tree: %w", err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if info.Size() > MaxFileSize {
			snap.omit(e.Name, info.Size())
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("work tree: %w", err)
		}
		snap.Files[e.Name] = data
	}
	head, err := r.repo.Head()
	var at *Snapshot
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound): // no commit yet: every file is new
		at = &Snapshot{}
	case err != nil:
		return nil, fmt.Errorf("HEAD of %s: %w", root, err)
	default:
		snap.Parent = head.Hash().String()
		if at, err = snapshotOf(r.repo, head.Hash(), MaxFileSize); err != nil {
			return nil, err
		}
	}
	snap.Changed = Changed(at, snap)
	snap.addStaged(at, staged)
	return snap, nil
}

// omit records name, of size bytes, as left out of the snapshot for its size.
func (snap *Snapshot) omit(name string, size int64) {
	if snap.Omitted == nil {
		snap.Omitted = map[string]int64{}
	}
	snap.Omitted[name] = size
}

// addStaged adds to snap.Staged, sorted, the paths whose staged blob (in staged) is neither what
// the work tree holds nor what HEAD's snapshot at has: the change the index holds.
func (snap *Snapshot) addStaged(at *Snapshot, staged map[string]plumbing.Hash) {
	for name, h := range staged {
		data, ok := snap.Files[name]
		if !ok || plumbing.ComputeHash(plumbing.BlobObject, data) == h {
			continue
		}
		if old, ok := at.Files[name]; ok && plumbing.ComputeHash(plumbing.BlobObject, old) == h {
			continue // staged as HEAD has it: the change is on disk only
		}
		snap.Staged = append(snap.Staged, name)
	}
	sort.Strings(snap.Staged)
}

// Changed lists the paths whose content differs between two snapshots, sorted. An omitted file
// (too large to read) counts as changed when its size did.
func Changed(a, b *Snapshot) []string {
	set := map[string]bool{}
	for _, pair := range [2][2]*Snapshot{{a, b}, {b, a}} {
		from, to := pair[0], pair[1]
		for name, data := range to.Files {
			if old, ok := from.Files[name]; !ok || !bytes.Equal(old, data) {
				set[name] = true
			}
		}
		for name, size := range to.Omitted {
			if old, ok := from.Omitted[name]; !ok || old != size {
				set[name] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for name := range set {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Commit is the commit the snapshot's history is read at: its Revision, or a work tree's Parent.
func (s *Snapshot) Commit() string {
	if s.Revision != "" {
		return s.Revision
	}
	return s.Parent
}

// Dirty says the snapshot is a work tree that differs from HEAD's tree, or whose index does.
func (s *Snapshot) Dirty() bool {
	return s.Revision == "" && (s.Parent == "" || len(s.Changed) > 0 || len(s.Staged) > 0)
}

// MergeBase returns the best common ancestor of commits a and b, as `git merge-base a b` does: the
// fork point a pull request from b into a is compared at. ok is false when they share no history.
func (r *Repo) MergeBase(a, b string) (base string, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ca, err := r.repo.CommitObject(plumbing.NewHash(a))
	if err != nil {
		return "", false, fmt.Errorf("commit %.12s: %w", a, err)
	}
	cb, err := r.repo.CommitObject(plumbing.NewHash(b))
	if err != nil {
		return "", false, fmt.Errorf("commit %.12s: %w", b, err)
	}
	bases, err := ca.MergeBase(cb)
	if err != nil || len(bases) == 0 {
		return "", false, err
	}
	return bases[0].Hash.String(), true, nil
}
