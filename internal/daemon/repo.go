package daemon

import (
	"errors"

	"github.com/llm-gitops/platform/internal/episode"
)

// commitOf names a revision of the repository, for an episode adopted into Git.
func (d *Daemon) commitOf(revision string) *episode.Commit {
	d.mu.RLock()
	repo := d.repo
	d.mu.RUnlock()
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
	d.mu.RLock()
	repo := d.repo
	d.mu.RUnlock()
	if repo == nil {
		return nil, errors.New("repository not open yet")
	}
	return repo.ReadFile(revision, name)
}
