// Package gitrepo reads the GitOps repository: a tree at a revision without a checkout, the
// history of paths, and (in later files) commits, pushes with retry and reverts.
package gitrepo

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Repo is an opened Git repository, on disk or cloned into memory.
type Repo struct {
	repo     *git.Repository
	location string
}

// Snapshot is the content of a tree at one commit.
type Snapshot struct {
	// Revision is the full commit hash the snapshot was read from.
	Revision string
	// Files maps slash-separated paths to file contents (regular files only).
	Files map[string][]byte
}

// Open opens a repository: a local directory (any subdirectory of a work tree, or a bare repo),
// or a URL (file://, https://, ssh://), which is cloned into memory.
func Open(location string) (*Repo, error) {
	if strings.Contains(location, "://") {
		// Init + fetch rather than clone: a clone fails when the remote HEAD names a missing branch,
		// as a fresh bare repository's does.
		r, err := git.Init(memory.NewStorage(), nil)
		if err != nil {
			return nil, fmt.Errorf("clone %s: %w", location, err)
		}
		if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{location}}); err != nil {
			return nil, fmt.Errorf("clone %s: %w", location, err)
		}
		err = r.Fetch(&git.FetchOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{
			"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"}})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return nil, fmt.Errorf("fetch %s: %w", location, err)
		}
		return &Repo{repo: r, location: location}, nil
	}
	r, err := git.PlainOpenWithOptions(location, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", location, err)
	}
	return &Repo{repo: r, location: location}, nil
}

// Resolve turns a revision (branch, tag, short or full hash, HEAD~1) into a commit hash.
func (r *Repo) Resolve(rev string) (string, error) {
	if rev == "" {
		rev = "HEAD"
		if _, err := r.repo.Head(); err != nil { // a fetched repository has no HEAD: use main
			rev = "main"
		}
	}
	h, err := r.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		// A clone into memory has remote-tracking branches only.
		if h2, err2 := r.repo.ResolveRevision(plumbing.Revision("refs/remotes/origin/" + rev)); err2 == nil {
			return h2.String(), nil
		}
		return "", fmt.Errorf("revision %q not found in %s: %w", rev, r.location, err)
	}
	return h.String(), nil
}

// Snapshot reads every regular file of the tree at rev.
func (r *Repo) Snapshot(rev string) (*Snapshot, error) {
	hash, err := r.Resolve(rev)
	if err != nil {
		return nil, err
	}
	commit, err := r.repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", hash, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", hash, err)
	}
	snap := &Snapshot{Revision: hash, Files: map[string][]byte{}}
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
		if !entry.Mode.IsFile() || entry.Mode == filemode.Symlink {
			continue
		}
		blob, err := r.repo.BlobObject(entry.Hash)
		if err != nil {
			return nil, fmt.Errorf("read %s at %s: %w", name, hash, err)
		}
		data, err := readBlob(blob)
		if err != nil {
			return nil, fmt.Errorf("read %s at %s: %w", name, hash, err)
		}
		snap.Files[name] = data
	}
	return snap, nil
}

func readBlob(b *object.Blob) ([]byte, error) {
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}
