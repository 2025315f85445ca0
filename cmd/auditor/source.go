package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/release"
	"github.com/llm-gitops/platform/internal/render"
)

// sourceFlags are the flags every command that reads the repository shares.
type sourceFlags struct {
	repo     string
	revision string
	cmd      *cobra.Command // whose stderr says what was read
}

func (f *sourceFlags) add(cmd *cobra.Command) {
	f.cmd = cmd
	addRepoFlag(cmd, &f.repo, "repository: a directory or a URL (file://, https://, ssh://)")
	cmd.Flags().StringVar(&f.revision, "revision", "", "Git revision to read (default: the work tree for a directory, HEAD for a URL)")
}

// open returns the source to render: the work tree when no revision is asked of a directory,
// otherwise the tree of the revision read from Git without a checkout.
func (f *sourceFlags) open() (render.Source, error) {
	if f.revision == "" && !gitrepo.IsURL(f.repo) {
		return render.FromDir(f.repo)
	}
	repo, err := gitOpts.open(context.Background(), f.repo)
	if err != nil {
		return render.Source{}, err
	}
	snap, err := repo.Snapshot(f.revision)
	if err != nil {
		return render.Source{}, err
	}
	return render.FromSnapshot(snap)
}

// render renders env from the source the flags name; every failure is an exit-2 error.
func (f *sourceFlags) render(env string) (*render.Result, error) {
	if env == "" {
		return nil, usageErr("--env is required")
	}
	s, err := f.open()
	if err != nil {
		return nil, failed(err)
	}
	known, err := s.Envs()
	if err != nil {
		return nil, failed(err)
	}
	if err := checkEnvs(known, env); err != nil {
		return nil, err
	}
	res, err := render.Engine{}.Render(context.Background(), s, render.Target{Name: env})
	if err != nil {
		return nil, failed(err)
	}
	if f.cmd != nil {
		fmt.Fprintln(f.cmd.ErrOrStderr(), "auditor:", f.describe(s, env))
	}
	return res, nil
}

// describe says what was rendered, for stderr: the work tree or a commit, and the pin Argo CD
// syncs the env at when that is another commit, since `diff` audits the pin.
func (f *sourceFlags) describe(s render.Source, env string) string {
	what := fmt.Sprintf("rendered overlays/%s from the work tree of %s (uncommitted changes included)", env, f.repo)
	if s.Revision() != "" {
		rev := f.revision
		if rev == "" {
			rev = "HEAD"
		}
		what = fmt.Sprintf("rendered overlays/%s at %s (%s)", env, rev, gitrepo.Short(s.Revision()))
	}
	data, err := s.ReadFile(release.File(env))
	if err != nil {
		return what
	}
	rel, err := release.Parse(env, data)
	if err != nil || !rel.Pinned() || rel.Revision == s.Revision() {
		return what
	}
	return fmt.Sprintf("%s; Argo CD syncs %s at its pin %s (%s): --revision %s renders that",
		what, env, gitrepo.Short(rel.Revision), release.File(env), rel.Revision)
}

// readAt says, for stderr, which commit of which repository a command read that reads commits
// only: "REPO at REV (SHORT)", REV being HEAD when none was asked; a URL loses its user info.
func readAt(repo, rev, hash string) string {
	if rev == "" {
		rev = "HEAD"
	}
	return fmt.Sprintf("%s at %s (%s)", gitrepo.RedactURL(repo), rev, gitrepo.Short(hash))
}
