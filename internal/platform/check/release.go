package check

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// releaseSources renders envs at their pins, one Source per pinned commit.
type releaseSources struct {
	repo    *gitrepo.Repo
	sources map[string]render.Source
}

func newReleaseSources(repo *gitrepo.Repo) *releaseSources {
	return &releaseSources{repo: repo, sources: map[string]render.Source{}}
}

// source returns what env renders from when the repository is at t: its pinned commit (t's
// Source itself when the env follows the branch) with the kustomize patches of its Application
// at t, as Argo CD builds it.
func (r *releaseSources) source(t *tree, env string) (render.Source, error) {
	if l, err := layoutOf(t.src); err == nil && !l.Platform() {
		return t.src, nil // release pins are this platform's: elsewhere an env runs the branch
	}
	pin := ""
	if data, err := t.src.ReadFile(release.File(env)); err == nil {
		if pin, err = release.PinIn(r.repo, env, data); err != nil {
			return render.Source{}, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return render.Source{}, err
	}
	patches, err := release.ApplicationPatches(t.src, env)
	if err != nil {
		return render.Source{}, err
	}
	s, ok := r.sources[pin]
	switch {
	case pin == "" || pin == t.snap.Revision:
		s = t.src
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
func releasePinned(repo *gitrepo.Repo, t *tree, env string) ([]Violation, error) {
	if env == release.Following {
		return nil, nil
	}
	return releaseFindings(repo, t, env)
}

func releaseFindings(repo *gitrepo.Repo, t *tree, env string) ([]Violation, error) {
	var out []Violation
	src := t.src
	file := release.File(env)
	data, err := src.ReadFile(file)
	switch {
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
		default:
			// A commit off the branch's history was never merged (nor reviewed as a merge).
			if hist := t.snap.Commit(); hist != "" {
				if on, err := repo.IsAncestor(r.Revision, hist); err == nil && !on {
					out = append(out, Violation{Rule: "release-pinned", Object: file, Message: fmt.Sprintf(
						"%s:%d pins %s to %s, which is not on the history of %s: promote only merged commits",
						file, r.Line, env, r.Revision, gitrepo.Short(hist))})
				}
			}
		}
	}
	res, err := appsOf(src, env)
	if err != nil || res == nil {
		return out, err
	}
	platformRepo := ""
	for _, o := range res.Objects {
		if isApplication(o) && syncsPath(o, render.OverlayPath(env)) {
			u, _, _ := unstructured.NestedString(o.Object, "spec", "source", "repoURL")
			platformRepo = normalizeRepoURL(u)
		}
	}
	for _, o := range res.Objects {
		if !isApplication(o) {
			continue
		}
		for _, s := range applicationSources(o) {
			repoURL, _ := s["repoURL"].(string)
			rev, _ := s["targetRevision"].(string)
			if repoURL == "" || normalizeRepoURL(repoURL) != platformRepo || release.IsCommit(rev) {
				continue
			}
			if rev == "" {
				rev = "HEAD"
			}
			out = append(out, Violation{Rule: "release-pinned", Object: id(o), Message: fmt.Sprintf(
				"Application %s/%s syncs %s at %q, a branch: every commit there reaches %s without a promotion; take targetRevision from %s (its replacements)",
				o.GetNamespace(), o.GetName(), repoURL, rev, env, file)})
		}
	}
	return out, nil
}

// applicationSources returns an Application's source and each of its sources (multi-source).
func applicationSources(app *unstructured.Unstructured) []map[string]any {
	var out []map[string]any
	if s, ok, _ := unstructured.NestedMap(app.Object, "spec", "source"); ok {
		out = append(out, s)
	}
	srcs, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
	for _, s := range srcs {
		if m, ok := s.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// normalizeRepoURL makes two spellings of one repository equal, as Argo CD compares them: case,
// a trailing slash and the .git suffix do not matter.
func normalizeRepoURL(u string) string {
	u = strings.ToLower(strings.TrimSpace(u))
	u = strings.TrimSuffix(u, "/")
	return strings.TrimSuffix(u, ".git")
}

// releasePatches checks the kustomize patches of the env's Application (spec.source.kustomize,
// on main): they reach the env without a promotion, so each must be a scheduled scale-up of the
// env's schedule (schedule.ScaleUpPatch), nothing else.
func releasePatches(snap *gitrepo.Snapshot, src render.Source, env string) []Violation {
	patches, err := release.ApplicationPatches(src, env)
	if err != nil {
		return []Violation{{Rule: "release-patches", Object: "apps/" + env, Message: err.Error()}}
	}
	if len(patches) == 0 {
		return nil
	}
	sched, err := schedule.Load(snap, env)
	var out []Violation
	for i, p := range patches {
		obj := fmt.Sprintf("Application llm-%s spec.source.kustomize.patches[%d]", env, i)
		switch {
		case err != nil:
			out = append(out, Violation{Rule: "release-patches", Object: obj, Message: fmt.Sprintf(
				"a patch of the Application reaches %s without a promotion, and %s has no schedule that could have written it (%v): promote the change instead", env, env, err)})
		default:
			if perr := sched.ScaleUpPatch(p); perr != nil {
				out = append(out, Violation{Rule: "release-patches", Object: obj, Message: perr.Error() +
					": only scheduled scale-ups go into the Application's patches; any other change reaches " + env + " by a promotion"})
			}
		}
	}
	return out
}

// appsDiff lists the changes of apps/<env>'s render from base to head; none when head has no
// apps/<env>.
func appsDiff(base, head render.Source, env string) ([]Change, error) {
	h, err := appsOf(head, env)
	if err != nil || h == nil {
		return nil, err
	}
	var before []*unstructured.Unstructured
	if b, err := appsOf(base, env); err == nil && b != nil {
		before = b.Objects
	}
	return diffObjects(before, h.Objects), nil
}

func isApplication(o *unstructured.Unstructured) bool {
	return o.GetKind() == "Application" && o.GroupVersionKind().Group == "argoproj.io"
}
