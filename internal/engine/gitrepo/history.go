package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Trailer is one `Key: value` line of a commit message's trailer block.
type Trailer struct {
	Key, Value string
}

// Person is a commit author or committer.
type Person struct {
	Name, Email string
	When        time.Time
}

// Commit is one commit of a history, with its message parsed.
type Commit struct {
	Hash      string
	Parents   []string
	Author    Person
	Committer Person
	// Subject is the first line of the message; Body the rest after the blank line (trailers
	// included, as git's %b).
	Subject, Body string
	Message       string
	// Trailers are parsed from the last paragraph of the message when every line of it is a
	// `Key: value` trailer (continuation lines start with whitespace).
	Trailers []Trailer
}

// Trailer returns the value of the first trailer with key (case-insensitive).
func (c Commit) Trailer(key string) (string, bool) {
	for _, t := range c.Trailers {
		if strings.EqualFold(t.Key, key) {
			return t.Value, true
		}
	}
	return "", false
}

// Log lists the commits reachable from the revision from (empty: HEAD or main), newest first,
// that changed any of paths (a path also matches everything below it; no paths: all commits).
// A merge is listed only when it differs from every parent at the paths, as git log does.
func (r *Repo) Log(ctx context.Context, from string, paths ...string) ([]Commit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hash, err := r.resolve(from)
	if err != nil {
		return nil, err
	}
	return logFrom(ctx, r.repo, plumbing.NewHash(hash), plumbing.ZeroHash, paths)
}

// Log lists the history of the snapshot's commit (see Repo.Log). Use it inside an
// UpdateRequest's Change for exactly-once checks: the history is the one the commit will follow.
func (s *Snapshot) Log(ctx context.Context, paths ...string) ([]Commit, error) {
	if s.repo == nil {
		return nil, errors.New("snapshot has no repository")
	}
	if s.Revision == "" { // the branch does not exist yet
		return nil, nil
	}
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	return logFrom(ctx, s.repo, plumbing.NewHash(s.Revision), plumbing.ZeroHash, paths)
}

// FirstParents lists the first-parent chain from the revision from (empty: HEAD or main),
// newest first, at most max commits (max <= 0: all): the commits a branch was at, one after the
// other, each merge standing for what it brought in.
func (r *Repo) FirstParents(ctx context.Context, from string, max int) ([]Commit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hash, err := r.resolve(from)
	if err != nil {
		return nil, err
	}
	var out []Commit
	for h := plumbing.NewHash(hash); max <= 0 || len(out) < max; {
		if ctx != nil {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		c, err := r.repo.CommitObject(h)
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", h, err)
		}
		out = append(out, toCommit(c))
		if c.NumParents() == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return out, nil
}

// FindTrailer returns the first commit having a trailer key: value (key case-insensitive, value
// exact), or nil.
func FindTrailer(commits []Commit, key, value string) *Commit {
	return FindTrailers(commits, Trailer{key, value})
}

// FindTrailers returns the first commit having all the trailers, or nil.
func FindTrailers(commits []Commit, want ...Trailer) *Commit {
	for i := range commits {
		ok := true
		for _, w := range want {
			found := false
			for _, t := range commits[i].Trailers {
				if strings.EqualFold(t.Key, w.Key) && t.Value == w.Value {
					found = true
					break
				}
			}
			if !found {
				ok = false
				break
			}
		}
		if ok {
			return &commits[i]
		}
	}
	return nil
}

var revertRE = regexp.MustCompile(`(?m)^This reverts commit ([0-9a-f]{40})[.,]`)

// IsRevert reports whether c is a revert (made by Revert or by `git revert`) and of which commit.
func IsRevert(c Commit) (revertedSHA string, ok bool) {
	if !strings.HasPrefix(c.Subject, `Revert "`) && !strings.HasPrefix(c.Subject, `Reapply "`) {
		return "", false
	}
	m := revertRE.FindStringSubmatch(c.Body)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// logFrom walks the history from head (stopping below stop when not zero, exclusive).
func logFrom(ctx context.Context, repo *git.Repository, head, stop plumbing.Hash, paths []string) ([]Commit, error) {
	iter, err := repo.Log(&git.LogOptions{From: head, Order: git.LogOrderCommitterTime})
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", head, err)
	}
	defer iter.Close()
	var out []Commit
	err = iter.ForEach(func(c *object.Commit) error {
		if ctx != nil {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if c.Hash == stop {
			return nil
		}
		if len(paths) > 0 {
			touched, err := touches(c, paths)
			if err != nil {
				return err
			}
			if !touched {
				return nil
			}
		}
		out = append(out, toCommit(c))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", head, err)
	}
	return out, nil
}

// touches reports whether c changed any of paths relative to its parents (for a merge: relative
// to every parent).
func touches(c *object.Commit, paths []string) (bool, error) {
	tree, err := c.Tree()
	if err != nil {
		return false, err
	}
	if c.NumParents() == 0 {
		for _, p := range paths {
			if h := entryHash(tree, p); !h.IsZero() {
				return true, nil
			}
		}
		return false, nil
	}
	for i := range c.ParentHashes {
		parent, err := c.Parent(i)
		if err != nil {
			return false, err
		}
		ptree, err := parent.Tree()
		if err != nil {
			return false, err
		}
		same := true
		for _, p := range paths {
			if entryHash(tree, p) != entryHash(ptree, p) {
				same = false
				break
			}
		}
		if same {
			return false, nil
		}
	}
	return true, nil
}

// entryHash is the hash of the blob or tree at path, zero when absent.
func entryHash(t *object.Tree, path string) plumbing.Hash {
	path = strings.Trim(path, "/")
	if path == "" || path == "." {
		return t.Hash
	}
	e, err := t.FindEntry(path)
	if err != nil {
		return plumbing.ZeroHash
	}
	return e.Hash
}

func toCommit(c *object.Commit) Commit {
	out := Commit{
		Hash:      c.Hash.String(),
		Author:    Person{c.Author.Name, c.Author.Email, c.Author.When},
		Committer: Person{c.Committer.Name, c.Committer.Email, c.Committer.When},
		Message:   c.Message,
	}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, p.String())
	}
	out.Subject, out.Body, out.Trailers = parseMessage(c.Message)
	return out
}

var trailerRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]*)\s*:\s?(.*)$`)

// parseMessage splits a commit message into subject (first line), body and trailers.
func parseMessage(msg string) (subject, body string, trailers []Trailer) {
	msg = strings.ReplaceAll(msg, "\r\n", "\n")
	subject, rest, _ := strings.Cut(msg, "\n")
	body = strings.Trim(rest, "\n")
	if body == "" {
		return subject, "", nil
	}
	paras := strings.Split(body, "\n\n")
	last := strings.Trim(paras[len(paras)-1], "\n")
	if len(paras) == 1 && !strings.HasPrefix(rest, "\n") {
		// A multi-line subject paragraph has no trailers.
		return subject, body + "\n", nil
	}
	for _, line := range strings.Split(last, "\n") {
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(trailers) > 0 {
			trailers[len(trailers)-1].Value += " " + strings.TrimSpace(line)
			continue
		}
		m := trailerRE.FindStringSubmatch(line)
		if m == nil {
			trailers = nil
			break
		}
		trailers = append(trailers, Trailer{Key: m[1], Value: strings.TrimSpace(m[2])})
	}
	return subject, body + "\n", trailers
}

// renderMessage appends trailers to a message as git's trailer block.
func renderMessage(msg string, trailers []Trailer) string {
	msg = strings.TrimRight(strings.ReplaceAll(msg, "\r\n", "\n"), "\n \t")
	var b strings.Builder
	b.WriteString(msg)
	b.WriteString("\n")
	if len(trailers) > 0 {
		b.WriteString("\n")
		for _, t := range trailers {
			fmt.Fprintf(&b, "%s: %s\n", t.Key, strings.ReplaceAll(t.Value, "\n", " "))
		}
	}
	return b.String()
}

// readFileAt reads path in tree; ok is false when absent (or not a file).
func readFileAt(t *object.Tree, path string) ([]byte, bool, error) {
	if t == nil {
		return nil, false, nil
	}
	f, err := t.File(path)
	if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, false, err
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	return b, err == nil, err
}

// CommitOf returns the commit rev names (see Resolve).
func (r *Repo) CommitOf(rev string) (Commit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hash, err := r.resolve(rev)
	if err != nil {
		return Commit{}, err
	}
	c, err := r.repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return Commit{}, fmt.Errorf("commit %s: %w", hash, err)
	}
	return toCommit(c), nil
}
