package gitrepo

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

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
		h, err := writeBlob(s, content)
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
	return encodeTree(s, entries)
}

// writeBlob stores content in s as a blob, returning its hash.
func writeBlob(s storer.EncodedObjectStorer, content []byte) (plumbing.Hash, error) {
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
	return s.SetEncodedObject(obj)
}

// encodeTree stores in s the tree of entries, in Git's order, returning its hash.
func encodeTree(s storer.EncodedObjectStorer, entries map[string]object.TreeEntry) (plumbing.Hash, error) {
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
