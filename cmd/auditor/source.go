package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/check"
)

// sourceFlags are the flags every command that reads the repository shares.
type sourceFlags struct {
	repo     string
	revision string
	cmd      *cobra.Command // whose stderr says what was read
	opened   *gitrepo.Repo  // the repository open read, when it read Git
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
	f.opened = repo
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
	l, err := layout.Read(s)
	if err != nil {
		return nil, failed(err)
	}
	if err := checkEnvs(l.Names(), env); err != nil {
		return nil, err
	}
	if e, _ := l.Env(env); e.Overlay == "" {
		return f.renderGroup(s, env)
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

// renderGroup renders an env of a layout without overlays (check.Applications): what its root
// syncs and every Application's objects, as one YAML stream.
func (f *sourceFlags) renderGroup(s render.Source, env string) (*render.Result, error) {
	objs, apps, err := check.Applications(s, env)
	if err != nil {
		return nil, failed(err)
	}
	res := &render.Result{Env: env, Revision: s.Revision(), Objects: objs}
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, failed(err)
		}
		res.YAML = append(append(res.YAML, "---\n"...), data...)
	}
	if f.cmd != nil {
		var parts []string
		for _, a := range apps {
			if a.Error != "" {
				parts = append(parts, a.Name+" "+a.Error)
			} else {
				parts = append(parts, fmt.Sprintf("%s (%s, %s)", a.Name, a.Path, count(a.Objects, "object")))
			}
		}
		at := "the work tree of " + f.repo
		if s.Revision() != "" {
			at = gitrepo.Short(s.Revision())
		}
		fmt.Fprintf(f.cmd.ErrOrStderr(), "auditor: rendered %s's Applications at %s: %s\n", env, at, strings.Join(parts, "; "))
	}
	return res, nil
}

// describe says what was rendered, for stderr: the work tree or a commit, and, for a pinned
// env, whether that is what Argo CD syncs. The pin is read where the env's pin lives now (the work
// tree of a directory, HEAD of a URL or a bare repository), never in the commit rendered, which
// names an older one: a hint printed here, run as printed, renders the pin.
func (f *sourceFlags) describe(s render.Source, env string) string {
	what := fmt.Sprintf("rendered overlays/%s from the work tree of %s (uncommitted changes included)", env, f.repo)
	if s.Revision() != "" {
		rev := f.revision
		if rev == "" {
			rev = "HEAD"
		}
		what = fmt.Sprintf("rendered overlays/%s at %s (%s)", env, rev, gitrepo.Short(s.Revision()))
	}
	rel, ok := f.currentRelease(s, env)
	switch {
	case !ok:
		return what
	case rel.Revision == s.Revision():
		return fmt.Sprintf("%s: %s's pin (%s)", what, env, release.File(env))
	default:
		return fmt.Sprintf("%s; Argo CD syncs %s at its pin %s (%s), not this: --revision %s renders that",
			what, env, gitrepo.Short(rel.Revision), release.File(env), rel.Revision)
	}
}

// currentRelease is env's release as the repository names it now: in the rendered work tree,
// else at HEAD (main for a URL); ok is false when the env is not pinned or no release is read.
func (f *sourceFlags) currentRelease(s render.Source, env string) (release.Release, bool) {
	var data []byte
	if s.Revision() == "" {
		data, _ = s.ReadFile(release.File(env))
	} else if f.opened != nil {
		if snap, err := f.opened.Snapshot(""); err == nil {
			data = snap.Files[release.File(env)]
		}
	}
	rel, err := release.Parse(env, data)
	if len(data) == 0 || err != nil || !rel.Pinned() {
		return release.Release{}, false
	}
	return rel, true
}

// tell says on stderr which tree s, opened by these flags, is: the work tree or a commit.
func (f *sourceFlags) tell(s render.Source) {
	if f.cmd == nil {
		return
	}
	what := fmt.Sprintf("the work tree of %s (uncommitted changes included)", f.repo)
	if s.Revision() != "" {
		what = readAt(f.repo, f.revision, s.Revision())
	}
	fmt.Fprintln(f.cmd.ErrOrStderr(), "auditor: read", what)
}

// readAt says, for stderr, which commit of which repository a command read that reads commits
// only: "REPO at REV (SHORT)", REV being HEAD when none was asked; a URL loses its user info.
func readAt(repo, rev, hash string) string {
	if rev == "" {
		rev = "HEAD"
	}
	return fmt.Sprintf("%s at %s (%s)", gitrepo.RedactURL(repo), rev, gitrepo.Short(hash))
}
