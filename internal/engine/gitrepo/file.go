package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ReadFile reads one file (slash-separated path from the repository's root) of the tree at rev,
// without reading the rest of the tree. An absent file is an error wrapping fs.ErrNotExist.
func (r *Repo) ReadFile(rev, name string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hash, commit, err := r.commitAt(rev)
	if err != nil {
		return nil, err
	}
	f, err := commit.File(name)
	switch {
	case errors.Is(err, object.ErrFileNotFound):
		return nil, fmt.Errorf("%s at %.12s: %w", name, hash, fs.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("read %s at %.12s: %w", name, hash, err)
	}
	data, err := readBlob(&f.Blob)
	if err != nil {
		return nil, fmt.Errorf("read %s at %.12s: %w", name, hash, err)
	}
	return data, nil
}

// ReadDir lists the entries (files and directories) of one directory (slash-separated path from
// the repository's root, "" or "." for the root) of the tree at rev, without reading the rest of
// the tree. An absent directory is an error wrapping fs.ErrNotExist.
func (r *Repo) ReadDir(rev, dir string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hash, commit, err := r.commitAt(rev)
	if err != nil {
		return nil, err
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %.12s: %w", hash, err)
	}
	if dir = path.Clean(dir); dir != "." {
		e, err := tree.FindEntry(dir)
		if err != nil || e.Mode != filemode.Dir {
			return nil, fmt.Errorf("%s at %.12s: %w", dir, hash, fs.ErrNotExist)
		}
		if tree, err = r.repo.TreeObject(e.Hash); err != nil {
			return nil, fmt.Errorf("read %s at %.12s: %w", dir, hash, err)
		}
	}
	names := make([]string, 0, len(tree.Entries))
	for _, e := range tree.Entries {
		names = append(names, e.Name)
	}
	return names, nil
}

// commitAt resolves rev to its commit; r.mu is held.
func (r *Repo) commitAt(rev string) (string, *object.Commit, error) {
	hash, err := r.resolve(rev)
	if err != nil {
		return "", nil, err
	}
	commit, err := r.repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return "", nil, fmt.Errorf("read commit %s: %w", hash, err)
	}
	return hash, commit, nil
}

// ReadFileAt reads one file of the tree at another commit of the snapshot's repository (e.g. the
// commit an env is pinned to). Snapshots built by hand have no repository to read from.
func (s *Snapshot) ReadFileAt(rev, name string) ([]byte, error) {
	if s.repo == nil {
		return nil, fmt.Errorf("read %s at %s: the snapshot has no repository", name, rev)
	}
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	r := &Repo{repo: s.repo, mu: &sync.Mutex{}}
	return r.ReadFile(rev, name)
}
