// Package release knows which revision of the repository each environment runs. An env's
// release file, apps/<env>/release.yaml, names it: a commit (the env is pinned: a change on main
// reaches it only through a promotion commit that moves the pin, see Promote) or a branch (the
// env follows it, as dev follows main). Argo CD reads the same value: apps/<env>/kustomization.yaml
// copies it into the targetRevision of the env's Applications.
package release

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// File is the path of env's release file.
func File(env string) string { return path.Join("apps", env, "release.yaml") }

// Following is the env that follows main instead of being pinned: the first stage of promotion.
const Following = "dev"

// Release is an env's release file.
type Release struct {
	Env string
	// Revision is a full commit hash (pinned) or a branch name (following).
	Revision string
	// PromotedFrom is the env the revision was promoted from, empty when none is recorded.
	PromotedFrom string
	// Line is the line of the revision in the file.
	Line int
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Pinned says whether the release names a commit, not a branch.
func (r Release) Pinned() bool { return IsCommit(r.Revision) }

// IsCommit says whether rev is a full commit hash, as a pin must be (a short hash or a tag can
// move or become ambiguous).
func IsCommit(rev string) bool { return fullSHA.MatchString(rev) }

// Parse reads a release file.
func Parse(env string, data []byte) (Release, error) {
	file := File(env)
	rn, err := kyaml.Parse(string(data))
	if err != nil {
		return Release{}, fmt.Errorf("%s: %w", file, err)
	}
	if rn.GetKind() != "ConfigMap" {
		return Release{}, fmt.Errorf("%s: want a ConfigMap (local-config) named release, found kind %q", file, rn.GetKind())
	}
	r := Release{Env: env}
	n, err := rn.Pipe(kyaml.Lookup("data", "revision"))
	if err != nil || n == nil || strings.TrimSpace(n.YNode().Value) == "" {
		return Release{}, fmt.Errorf("%s: no data.revision", file)
	}
	r.Revision, r.Line = strings.TrimSpace(n.YNode().Value), n.YNode().Line
	if f, _ := rn.Pipe(kyaml.Lookup("data", "promotedFrom")); f != nil {
		r.PromotedFrom = f.YNode().Value
	}
	return r, nil
}

// Read returns env's release in a snapshot's files; ok is false when the env has no release file
// (it follows the branch the snapshot was read from).
func Read(files map[string][]byte, env string) (r Release, ok bool, err error) {
	data, ok := files[File(env)]
	if !ok {
		return Release{}, false, nil
	}
	r, err = Parse(env, data)
	return r, err == nil, err
}

// RevisionAt returns the commit env runs when the repository is at rev: its pinned commit, else
// rev itself (resolved). A pin the repository does not have is an error naming the file.
func RevisionAt(repo *gitrepo.Repo, env, rev string) (string, error) {
	head, err := repo.Resolve(rev)
	if err != nil {
		return "", err
	}
	data, err := repo.ReadFile(head, File(env))
	if errors.Is(err, fs.ErrNotExist) {
		return head, nil // no release file: the env follows the branch
	}
	if err != nil {
		return "", err
	}
	pin, err := PinIn(repo, env, data)
	if pin == "" && err == nil {
		return head, nil
	}
	return pin, err
}

// PinIn returns the commit a release file's data pins env to, checked to be in repo; "" when the
// file names a branch (the env follows it). A pin the repository does not have is an error naming
// the file and line.
func PinIn(repo *gitrepo.Repo, env string, data []byte) (string, error) {
	r, err := Parse(env, data)
	if err != nil {
		return "", err
	}
	if !r.Pinned() {
		return "", nil
	}
	if _, err := repo.Resolve(r.Revision); err != nil {
		return "", fmt.Errorf("%s:%d pins %s to %s, which the repository does not have: %w", File(env), r.Line, env, r.Revision, err)
	}
	return r.Revision, nil
}

// Set returns the release file data with data.revision and data.promotedFrom set, touching only
// their lines (comments and layout stay). promotedFrom "" leaves that key as it is.
func Set(env string, data []byte, revision, promotedFrom string) ([]byte, error) {
	out, err := setKey(data, "revision", revision)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", File(env), err)
	}
	if promotedFrom != "" {
		if out, err = setKey(out, "promotedFrom", promotedFrom); err != nil {
			return nil, fmt.Errorf("%s: %w", File(env), err)
		}
	}
	r, err := Parse(env, out)
	if err != nil || r.Revision != revision {
		return nil, fmt.Errorf("%s: the edit of data.revision did not take (%v)", File(env), err)
	}
	return out, nil
}

// setKey replaces the value of data.<key> on its line.
func setKey(data []byte, key, value string) ([]byte, error) {
	rn, err := kyaml.Parse(string(data))
	if err != nil {
		return nil, err
	}
	n, err := rn.Pipe(kyaml.Lookup("data", key))
	if err != nil || n == nil {
		return nil, fmt.Errorf("no data.%s", key)
	}
	y := n.YNode()
	lines := strings.SplitAfter(string(data), "\n")
	if y.Line < 1 || y.Line > len(lines) {
		return nil, fmt.Errorf("data.%s: line %d out of range", key, y.Line)
	}
	l := lines[y.Line-1]
	i := strings.Index(l, key+":")
	if i < 0 {
		return nil, fmt.Errorf("data.%s is not on one line of its own (line %d)", key, y.Line)
	}
	rest := l[i+len(key)+1:]
	comment := ""
	if j := strings.Index(rest, " #"); j >= 0 {
		comment = rest[j:]
		comment = strings.TrimRight(comment, "\r\n")
	}
	nl := l[len(strings.TrimRight(l, "\r\n")):]
	lines[y.Line-1] = l[:i] + key + ": " + value + comment + nl
	return []byte(strings.Join(lines, "")), nil
}
