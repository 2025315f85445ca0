package check

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/release"
	"github.com/llm-gitops/platform/internal/render"
)

// releaseSources renders envs at their pins, one Source per pinned commit.
type releaseSources struct {
	repo    *gitrepo.Repo
	sources map[string]render.Source
}

func newReleaseSources(repo *gitrepo.Repo) *releaseSources {
	return &releaseSources{repo: repo, sources: map[string]render.Source{}}
}

// source returns what env renders from when the repository is at rev (src): its pinned commit
// (src itself when the env follows the branch) with the kustomize patches of its Application at
// rev, as Argo CD builds it.
func (r *releaseSources) source(src render.Source, rev, env string) (render.Source, error) {
	pin, err := release.RevisionAt(r.repo, env, rev)
	if err != nil {
		return render.Source{}, err
	}
	patches, err := release.ApplicationPatches(src, env)
	if err != nil {
		return render.Source{}, err
	}
	s, ok := r.sources[pin]
	switch {
	case pin == rev:
		s = src
	case !ok:
		if s, _, err = snapshot(r.repo, pin); err != nil {
			return render.Source{}, err
		}
		r.sources[pin] = s
	}
	return s.WithPatches(env, patches)
}

// releasePinned checks that every env but the one that follows main (release.Following) is
// pinned: its release file names a commit the repository has, and every Application of apps/<env>
// that syncs from the platform repository (the one its overlay's Application uses) carries a
// commit as targetRevision. An env tracking a branch takes every change of main unreviewed
// (issue #15: "prod tracking a branch").
func releasePinned(repo *gitrepo.Repo, src render.Source, env string) ([]Violation, error) {
	if env == release.Following {
		return nil, nil
	}
	return releaseFindings(repo, src, env)
}

func releaseFindings(repo *gitrepo.Repo, src render.Source, env string) ([]Violation, error) {
	var out []Violation
	file := release.File(env)
	data, err := repo.ReadFile(src.Revision(), file)
	switch {
	case src.Revision() == "": // a work tree: no history to read the release from
	case err != nil:
		out = append(out, Violation{Rule: "release-pinned", Object: file, Message: fmt.Sprintf(
			"%s has no release file %s: it follows the branch, so every commit on main reaches it unpromoted; pin it to a commit (auditor promote)", env, file)})
	default:
		r, err := release.Parse(env, data)
		switch {
		case err != nil:
			out = append(out, Violation{Rule: "release-pinned", Object: file, Message: err.Error()})
		case !r.Pinned():
			out = append(out, Violation{Rule: "release-pinned", Object: file, Message: fmt.Sprintf(
				"%s:%d: %s tracks %q, not a commit: every commit there reaches %s unpromoted; pin a full commit hash (auditor promote --from ... --to %s)",
				file, r.Line, env, r.Revision, env, env)})
		}
	}
	res, err := src.RenderApps(env)
	if err != nil || res == nil {
		return out, err
	}
	platformRepo := ""
	for _, o := range res.Objects {
		if isApplication(o) && syncsPath(o, render.OverlayPath(env)) {
			platformRepo, _, _ = unstructured.NestedString(o.Object, "spec", "source", "repoURL")
		}
	}
	for _, o := range res.Objects {
		if !isApplication(o) {
			continue
		}
		repoURL, _, _ := unstructured.NestedString(o.Object, "spec", "source", "repoURL")
		rev, _, _ := unstructured.NestedString(o.Object, "spec", "source", "targetRevision")
		if repoURL == "" || repoURL != platformRepo || release.IsCommit(rev) {
			continue
		}
		if rev == "" {
			rev = "HEAD"
		}
		out = append(out, Violation{Rule: "release-pinned", Object: id(o), Message: fmt.Sprintf(
			"Application %s/%s syncs %s at %q, a branch: every commit there reaches %s without a promotion; take targetRevision from %s (its replacements)",
			o.GetNamespace(), o.GetName(), repoURL, rev, env, file)})
	}
	return out, nil
}

func isApplication(o *unstructured.Unstructured) bool {
	return o.GetKind() == "Application" && o.GroupVersionKind().Group == "argoproj.io"
}

// EnvDiff renders env's overlay at two commits as they are (no pin is read: pass the pins) and
// lists the objects added, removed or changed, with the changed fields' old and new values: what a
// promotion from base to head does to the env.
func EnvDiff(repo *gitrepo.Repo, env, base, head string) ([]Change, error) {
	var objs [2][]*unstructured.Unstructured
	for i, rev := range []string{base, head} {
		src, _, err := source(repo, rev)
		if err != nil {
			return nil, err
		}
		res, err := src.Render(env)
		if err != nil {
			return nil, fmt.Errorf("%.12s: %w", rev, err)
		}
		objs[i] = res.Objects
	}
	return diffObjects(objs[0], objs[1]), nil
}
