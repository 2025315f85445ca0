package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/sergi/go-diff/diffmatchpatch"
)

// RevertRequest describes a revert commit (see Remote.Revert).
type RevertRequest struct {
	Branch string
	Author Person
	// Trailers are appended after git's revert message.
	Trailers []Trailer
	Deadline time.Time
	Backoff  Backoff
}

// RevertConflictError is returned when a commit after the reverted one changed lines the
// reverted commit touched (or deleted/re-created a file it changed): the revert is refused.
type RevertConflictError struct {
	Commit string // the commit to revert
	Path   string // the first conflicting file
	// LaterCommit is the commit that made the conflicting change ("" if it could not be found).
	LaterCommit  string
	LaterSubject string
}

func (e *RevertConflictError) Error() string {
	if e.LaterCommit == "" {
		return fmt.Sprintf("cannot revert %s: %s was changed again by a later commit", e.Commit, e.Path)
	}
	return fmt.Sprintf("cannot revert %s: later commit %s (%q) changed the same lines of %s",
		e.Commit, e.LaterCommit, e.LaterSubject, e.Path)
}

// ErrNotOnBranch is returned when the commit to revert is not in the branch's history.
var ErrNotOnBranch = errors.New("commit is not on the branch")

// Revert commits the reverse of commit sha (full or abbreviated hash) on top of the current head
// of req.Branch, with git's message (`Revert "<subject>"`, blank line, `This reverts commit
// <sha>.`) and pushes it, retrying on races like Update. The reverse is applied line by line:
// commits after sha that changed other lines of the same files are kept; when one changed lines
// sha touched (or lines right next to an insertion point), the revert is refused with a
// *RevertConflictError naming that commit. Files sha added are deleted, files it deleted are
// restored. Result.NoChange is true when the head already has sha's changes undone. Merge
// commits are not supported.
func (r *Remote) Revert(ctx context.Context, sha string, req RevertRequest) (Result, error) {
	ureq := UpdateRequest{Branch: req.Branch, Author: req.Author, Trailers: req.Trailers,
		Deadline: req.Deadline, Backoff: req.Backoff}
	var msgFor string
	compute := func(repo *git.Repository, head *object.Commit) (*object.Tree, map[string][]byte, error) {
		if head == nil {
			return nil, nil, &permanentError{fmt.Errorf("%w: %s", ErrBranchNotFound, req.Branch)}
		}
		h, err := repo.ResolveRevision(plumbing.Revision(sha))
		if err != nil {
			return nil, nil, &permanentError{fmt.Errorf("revert %s: %w: %v", sha, ErrNotOnBranch, err)}
		}
		target, err := repo.CommitObject(*h)
		if err != nil {
			return nil, nil, &permanentError{fmt.Errorf("revert %s: %w", sha, err)}
		}
		if msgFor != target.Hash.String() {
			subject, _, _ := strings.Cut(strings.TrimLeft(target.Message, "\n"), "\n")
			ureq.Message = "Revert \"" + subject + "\"\n\nThis reverts commit " + target.Hash.String() + "."
			msgFor = target.Hash.String()
		}
		base, changes, err := revertChanges(repo, target, head)
		if err != nil {
			return nil, nil, &permanentError{err}
		}
		return base, changes, nil
	}
	return r.update(ctx, &ureq, compute)
}

// revertChanges computes the file contents that undo target on head.
func revertChanges(repo *git.Repository, target, head *object.Commit) (*object.Tree, map[string][]byte, error) {
	if target.NumParents() > 1 {
		return nil, nil, fmt.Errorf("revert %s: merge commits are not supported", target.Hash)
	}
	if target.Hash != head.Hash {
		ok, err := target.IsAncestor(head)
		if err != nil {
			return nil, nil, fmt.Errorf("revert %s: %w", target.Hash, err)
		}
		if !ok {
			return nil, nil, fmt.Errorf("revert %s: %w", target.Hash, ErrNotOnBranch)
		}
	}
	ctree, err := target.Tree()
	if err != nil {
		return nil, nil, err
	}
	var ptree *object.Tree
	if target.NumParents() == 1 {
		parent, err := target.Parent(0)
		if err != nil {
			return nil, nil, err
		}
		if ptree, err = parent.Tree(); err != nil {
			return nil, nil, err
		}
	}
	htree, err := head.Tree()
	if err != nil {
		return nil, nil, err
	}
	diffBase := ptree
	if diffBase == nil {
		diffBase = &object.Tree{}
	}
	diff, err := object.DiffTree(diffBase, ctree)
	if err != nil {
		return nil, nil, err
	}
	sorted := changedPaths(diff)
	changes := map[string][]byte{}
	for _, path := range sorted {
		p, pOK, err := readFileAt(ptree, path)
		if err != nil {
			return nil, nil, err
		}
		c, cOK, err := readFileAt(ctree, path)
		if err != nil {
			return nil, nil, err
		}
		h, hOK, err := readFileAt(htree, path)
		if err != nil {
			return nil, nil, err
		}
		out, outOK, conflict := revertFile(p, c, h, pOK, cOK, hOK)
		if conflict {
			cerr := &RevertConflictError{Commit: target.Hash.String(), Path: path}
			if later := blame(repo, target, head, path, p, c, pOK, cOK); later != nil {
				cerr.LaterCommit = later.Hash.String()
				cerr.LaterSubject, _, _ = strings.Cut(later.Message, "\n")
			}
			return nil, nil, cerr
		}
		if outOK == hOK && bytes.Equal(out, h) {
			continue
		}
		if !outOK {
			changes[path] = nil
		} else {
			if out == nil {
				out = []byte{}
			}
			changes[path] = out
		}
	}
	return htree, changes, nil
}

// changedPaths is the paths diff changes, from either side, sorted and each once.
func changedPaths(diff object.Changes) []string {
	paths := map[string]bool{}
	for _, ch := range diff {
		if ch.From.Name != "" {
			paths[ch.From.Name] = true
		}
		if ch.To.Name != "" {
			paths[ch.To.Name] = true
		}
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	return sorted
}

// blame finds the commit after target (on head's first-parent chain) that made path conflict:
// the latest commit where the revert went from applicable to conflicting.
func blame(repo *git.Repository, target, head *object.Commit, path string, p, c []byte, pOK, cOK bool) *object.Commit {
	var chain []*object.Commit // newest first
	for cur := head; cur != nil && cur.Hash != target.Hash; {
		chain = append(chain, cur)
		if cur.NumParents() == 0 {
			chain = nil // target not on the first-parent chain
			break
		}
		next, err := cur.Parent(0)
		if err != nil {
			return nil
		}
		cur = next
	}
	if len(chain) == 0 {
		// Fall back to the newest commit that touched the file.
		iter, err := repo.Log(&git.LogOptions{From: head.Hash})
		if err != nil {
			return nil
		}
		defer iter.Close()
		var found *object.Commit
		_ = iter.ForEach(func(x *object.Commit) error {
			if x.Hash == target.Hash {
				return errStop
			}
			if ok, _ := touches(x, []string{path}); ok {
				found = x
				return errStop
			}
			return nil
		})
		return found
	}
	prevConflict := false // at target itself the revert applies
	var culprit *object.Commit
	for i := len(chain) - 1; i >= 0; i-- {
		t, err := chain[i].Tree()
		if err != nil {
			return culprit
		}
		x, xOK, err := readFileAt(t, path)
		if err != nil {
			return culprit
		}
		_, _, conflict := revertFile(p, c, x, pOK, cOK, xOK)
		if conflict && !prevConflict {
			culprit = chain[i]
		}
		prevConflict = conflict
	}
	return culprit
}

var errStop = errors.New("stop")

// revertFile undoes the change p→c on h. It returns the new content and presence, or conflict.
func revertFile(p, c, h []byte, pOK, cOK, hOK bool) (out []byte, outOK bool, conflict bool) {
	switch {
	case hOK == cOK && bytes.Equal(h, c): // untouched since: restore the parent's version
		return p, pOK, false
	case hOK == pOK && bytes.Equal(h, p): // already undone
		return h, hOK, false
	case !hOK || !cOK || !pOK:
		// Deleted or re-created later, or added by the commit and changed later (deleting it
		// would lose the later changes).
		return nil, false, true
	}
	merged, ok := merge3(splitLines(c), splitLines(h), splitLines(p))
	if !ok {
		return nil, false, true
	}
	return []byte(strings.Join(merged, "")), true, false
}

// splitLines splits after each "\n" (the last line may have none).
func splitLines(b []byte) []string {
	s := string(b)
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// hunk replaces base[s:e] (e == s: an insertion before base[s]) with lines.
type hunk struct {
	s, e  int
	lines []string
}

func (h hunk) equal(o hunk) bool {
	if h.s != o.s || h.e != o.e || len(h.lines) != len(o.lines) {
		return false
	}
	for i := range h.lines {
		if h.lines[i] != o.lines[i] {
			return false
		}
	}
	return true
}

// conflicts reports whether two hunks of different sides overlap: they replace common base
// lines, or one inserts at a point touching the other (the order would be ambiguous).
// Replacements of adjacent lines do not conflict (git's merge would flag them).
func (h hunk) conflicts(o hunk) bool {
	if h.s < o.e && o.s < h.e {
		return true
	}
	if h.s == h.e || o.s == o.e {
		return h.s <= o.e && o.s <= h.e
	}
	return false
}

// touches reports whether two hunks that do not overlap meet: one ends where the other starts.
func (h hunk) touches(o hunk) bool { return h.e == o.s || o.e == h.s }

// ambiguous reports whether a base line next to or under the hunk occurs more than once in base:
// a diff may then have aligned it with another copy, so where the hunk sits is a guess.
func (h hunk) ambiguous(base []string, count map[string]int) bool {
	for i := h.s - 1; i <= h.e; i++ {
		if i >= 0 && i < len(base) && count[base[i]] > 1 {
			return true
		}
	}
	return false
}

// merge3 applies the changes base→theirs to ours, which has its own changes base→ours. Hunks of
// the two sides that overlap conflict; hunks that only meet merge, unless a line around either
// repeats in base (where the diffs' alignment is a guess, git's merge conflicts, and so does this).
func merge3(base, ours, theirs []string) ([]string, bool) {
	a := lineHunks(base, ours)
	b := lineHunks(base, theirs)
	count := map[string]int{}
	for _, l := range base {
		count[l]++
	}
	all := append([]hunk(nil), a...)
	for _, hb := range b {
		dup := false
		for _, ha := range a {
			if ha.equal(hb) {
				dup = true
				break
			}
			if ha.conflicts(hb) || (ha.touches(hb) && (ha.ambiguous(base, count) || hb.ambiguous(base, count))) {
				return nil, false
			}
		}
		if !dup {
			all = append(all, hb)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].s < all[j].s })
	var out []string
	i := 0
	for _, h := range all {
		out = append(out, base[i:h.s]...)
		out = append(out, h.lines...)
		i = h.e
	}
	return append(out, base[i:]...), true
}

// lineHunks diffs a and b by lines with go-diff's Myers diff (line mode: each line is one
// symbol) and returns the changes as hunks over a.
func lineHunks(a, b []string) []hunk {
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0 // the exact diff, not one cut short by a clock
	ra, rb, _ := dmp.DiffLinesToRunes(strings.Join(a, ""), strings.Join(b, ""))
	var out []hunk
	var cur *hunk
	i, j := 0, 0 // lines of a and b consumed
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		n := utf8.RuneCountInString(d.Text)
		if d.Type == diffmatchpatch.DiffEqual {
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			i, j = i+n, j+n
			continue
		}
		if cur == nil {
			cur = &hunk{s: i, e: i}
		}
		if d.Type == diffmatchpatch.DiffDelete {
			i += n
			cur.e = i
		} else {
			cur.lines = append(cur.lines, b[j:j+n]...)
			j += n
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}
