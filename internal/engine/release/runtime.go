package release

import (
	"context"
	"fmt"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// Runs is what Git says an env runs when the repository is at a revision: the commit its overlay
// is rendered at (its pin, or that revision) and the kustomize patches its Application adds on
// top (spec.source.kustomize.patches: the runtime knobs, such as scheduled scale-ups, that are
// committed to main and reach a pinned env without a promotion).
type Runs struct {
	Revision string
	Patches  []render.Patch
}

// At reads what env runs when the repository is at rev.
func At(repo *gitrepo.Repo, env, rev string) (Runs, error) {
	pin, err := RevisionAt(repo, env, rev)
	if err != nil {
		return Runs{}, err
	}
	src, err := render.AtRevision(repo, rev)
	if err != nil {
		return Runs{}, err
	}
	patches, err := ApplicationPatches(src, env)
	return Runs{Revision: pin, Patches: patches}, err
}

// ApplicationPatches renders apps/<env> and returns the kustomize patches of the Application
// that syncs overlays/<env>; none when the repository has no apps/<env>. Kustomize options the
// auditor does not apply (namePrefix, images, ...) are an error naming them.
func ApplicationPatches(src render.Source, env string) ([]render.Patch, error) {
	app, err := Application(src, env)
	if err != nil || app == nil {
		return nil, err
	}
	a, err := argocd.FromUnstructured(app)
	if err != nil {
		return nil, err
	}
	if len(a.KustomizeUnsupported) > 0 {
		return nil, fmt.Errorf("Application %s sets kustomize options the auditor does not apply: %v", a.Name, a.KustomizeUnsupported)
	}
	// The env's own Application carries patches (the runtime knobs); its other kustomize
	// options are applied by the audit, not by the readers of this (check, ledger, schedule).
	if k, err := a.KustomizeOptions(""); err != nil || !k.Empty() {
		return nil, fmt.Errorf("Application %s sets kustomize options besides patches (namePrefix, images, labels, ...): check, the ledger and schedules render its overlay with its patches only", a.Name)
	}
	return a.KustomizePatches, nil
}

// Application renders apps/<env> and returns the Application whose source is overlays/<env>; nil
// when there is none.
func Application(src render.Source, env string) (*unstructured.Unstructured, error) {
	res, err := render.Apps(context.Background(), render.Engine{}, src, env)
	if err != nil || res == nil {
		return nil, err
	}
	for _, o := range res.Objects {
		p, _, _ := unstructured.NestedString(o.Object, "spec", "source", "path")
		if o.GetKind() == "Application" && o.GroupVersionKind().Group == "argoproj.io" && path.Clean(p) == render.OverlayPath(env) {
			return o, nil
		}
	}
	return nil, nil
}
