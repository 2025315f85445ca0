package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// commitOf names a revision of the repository, for an episode adopted into Git.
func (d *Daemon) commitOf(revision string) *episode.Commit {
	repo := d.git.Repo()
	if repo == nil {
		return nil
	}
	c, err := repo.CommitOf(revision)
	if err != nil {
		return nil
	}
	return &episode.Commit{SHA: c.Hash, Author: c.Author.Name, Date: c.Author.When, Subject: c.Subject}
}

// readFile reads a file of the repository at a revision, for the adopt patches in messages.
func (d *Daemon) readFile(revision, name string) ([]byte, error) {
	repo := d.git.Repo()
	if repo == nil {
		return nil, errors.New("repository not open yet")
	}
	return repo.ReadFile(revision, name)
}

// adoptWalk bounds the history walks that name adopting commits, all those of one report
// together (they run in an env's audit).
const adoptWalk = 20 * time.Second

// adopter names the commit that put an episode's live value into Git: among the first-parent
// commits after the episode's revision up to revision, the one that last changed the rendered
// value at the field (blame's walk, over those commits only). ok is false when Git no longer
// declares the object or the field. When the walk cannot say by deadline, the revision itself
// is named.
func (d *Daemon) adopter(e episode.Episode, revision string, deadline time.Time) (*episode.Commit, bool) {
	repo := d.git.Repo()
	fallback := d.commitOf(revision)
	if repo == nil {
		return fallback, true
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	commits, err := repo.FirstParents(ctx, revision, blame.DefaultMaxCommits)
	if err != nil {
		return fallback, true
	}
	n := 0
	for n < len(commits) && commits[n].Hash != e.Revision {
		n++
	}
	if n == len(commits) { // not an ancestor within reach: a force-push, or too far back
		return fallback, true
	}
	gv, _ := schema.ParseGroupVersion(e.APIVersion)
	ref := blame.Ref{Kind: e.Kind, Group: gv.Group, Namespace: e.Namespace, Name: e.Name}
	res, err := blame.Git(ctx, repo, blame.Request{Env: e.Env, Object: ref, Revision: revision, MaxCommits: n + 1},
		blame.Options{Renders: d.adoptRenders})
	var nd *blame.NotDeclaredError
	switch {
	case errors.As(err, &nd):
		return nil, false
	case err != nil:
		d.log.Warn("adopting commit not found", "object", e.Kind+"/"+e.Name, "err", err)
		return fallback, true
	}
	var newest *blame.Commit
	for _, f := range res.Fields {
		if f.Git == nil || f.Commit == nil || !(f.Path == e.Path || strings.HasPrefix(f.Path, e.Path+".") || strings.HasPrefix(f.Path, e.Path+"[")) {
			continue
		}
		if newest == nil || f.Commit.Date.After(newest.Date) {
			newest = f.Commit
		}
	}
	if newest != nil && (newest.SHA == e.Revision || newest.Boundary) {
		newest = nil // unchanged over the walk: the render equals live by normalisation alone
		if e.Path != "" {
			return fallback, true
		}
	}
	if newest == nil {
		if e.Path == "" {
			return fallback, true
		}
		return nil, false // Git no longer declares the field
	}
	return &episode.Commit{SHA: newest.SHA, Author: newest.Author, Date: newest.Date, Subject: newest.Subject}, true
}

// gitFetched logs and counts one fetch's outcome. On failure the last good revision keeps being
// audited.
//
// A URL is cloned once into the state directory and then fetched incrementally (only new objects travel),
// with RepoAuth's credentials and FetchTimeout per operation; errors name the URL without user
// info. A local directory is read in place, and sees new commits without a fetch.
func (d *Daemon) gitFetched(err error, stale time.Duration) {
	if err != nil {
		d.metrics.gitFetchErrors.Inc()
		d.log.Error("git fetch failed; auditing the last fetched revision", "err", err, "stale", stale.Round(time.Second))
		return
	}
	d.metrics.gitLastFetch.SetToCurrentTime()
}

// onDisk keeps rc's clone in the state directory, under git/<use>: one clone per use, as each is
// written by its own loop. Its history then costs disk, not memory (a large file committed once
// is held inflated by an in-memory clone), and a restart fetches only what is new.
func (d *Daemon) onDisk(rc gitrepo.RemoteConfig, use string) gitrepo.RemoteConfig {
	rc.Dir = filepath.Join(d.cfg.StateDir, "git", use)
	return rc
}

// openRepo opens the repository: a directory in place, a URL cloned into the state directory
// with RepoAuth.
func (d *Daemon) openRepo(ctx context.Context) (*gitrepo.Repo, error) {
	if !gitrepo.IsURL(d.cfg.Repo) {
		return gitrepo.Open(d.cfg.Repo)
	}
	rc := d.cfg.RepoAuth
	rc.URL = d.cfg.Repo
	remote, err := gitrepo.NewRemote(d.onDisk(rc, "repo"))
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, d.cfg.FetchTimeout.Duration)
	defer cancel()
	return remote.Open(octx)
}

// TriggerFetch asks for a Git fetch and a re-audit (the push webhook).
func (d *Daemon) TriggerFetch() { d.git.Trigger() }
