package gitrepo

import (
	"fmt"
	"path"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// Snapshots reads the trees of many commits of one repository, each tree and blob once: a walk
// back through history reads only what each commit changed (a full Snapshot reads and inflates
// every blob of the tree, every time). What it read stays in memory until it is dropped. It is
// not safe for concurrent use.
type Snapshots struct {
	r     *Repo
	blobs map[plumbing.Hash][]byte
	trees map[plumbing.Hash][]treeFile
}

// treeFile is a regular file below a tree, or a symlink (link): its path from that tree and its
// blob.
type treeFile struct {
	name string
	blob plumbing.Hash
	link bool
}

// Snapshots returns a reader of snapshots that share what they read.
func (r *Repo) Snapshots() *Snapshots {
	return &Snapshots{r: r, blobs: map[plumbing.Hash][]byte{}, trees: map[plumbing.Hash][]treeFile{}}
}

// At reads every regular file of the tree at rev, as Repo.Snapshot does. The Files' contents are
// shared with other snapshots: do not change them.
func (s *Snapshots) At(rev string) (*Snapshot, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	hash, err := s.r.resolve(rev)
	if err != nil {
		return nil, err
	}
	commit, err := s.r.repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", hash, err)
	}
	files, err := s.files(commit.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", hash, err)
	}
	snap := &Snapshot{Revision: hash, Files: make(map[string][]byte, len(files)), repo: s.r.repo, mu: s.r.mu}
	for _, f := range files {
		if f.link {
			snap.addSymlink(f.name)
			continue
		}
		if err := readFile(s.r.repo, snap, f.name, f.blob, s.blobs, MaxFileSize); err != nil {
			return nil, fmt.Errorf("read %s at %s: %w", f.name, hash, err)
		}
	}
	return snap, nil
}

// files lists the regular files and the symlinks below a tree (submodules left out, as Snapshot
// does).
func (s *Snapshots) files(h plumbing.Hash) ([]treeFile, error) {
	if fs, ok := s.trees[h]; ok {
		return fs, nil
	}
	tree, err := s.r.repo.TreeObject(h)
	if err != nil {
		return nil, err
	}
	var out []treeFile
	for _, e := range tree.Entries {
		switch {
		case e.Mode == filemode.Dir:
			sub, err := s.files(e.Hash)
			if err != nil {
				return nil, err
			}
			for _, f := range sub {
				out = append(out, treeFile{name: path.Join(e.Name, f.name), blob: f.blob, link: f.link})
			}
		case e.Mode == filemode.Symlink:
			out = append(out, treeFile{name: e.Name, blob: e.Hash, link: true}) // its name only
		case e.Mode.IsFile():
			out = append(out, treeFile{name: e.Name, blob: e.Hash})
		}
	}
	s.trees[h] = out
	return out, nil
}
