package check

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

// NextPromotion is a pinned env judged as it would run if the head were promoted to it: the
// head's overlay at the head, with the kustomize patches of the env's Application there, as
// `auditor promote` moves the pin. A change to a pinned env's overlay or to a base reaches the
// env only through a promotion; this is where it is checked first.
type NextPromotion struct {
	// Revision is the commit the env would run; empty when the head is the work tree.
	Revision string `json:"revision"`
	// Changes are what the promotion would change in the env: from its pin to the head.
	Changes []Change `json:"changes"`
	// Introduced are the changes the checked change itself (fork point → head) makes to the
	// next promotion: none when it touches nothing the env renders.
	Introduced []Change `json:"introduced"`
	// Violations are the rules the next promotion breaks that it did not break on the same
	// object at the fork point: the checked change introduced them, and it fails.
	Violations []Violation `json:"violations"`
	// Inherited are the rules the next promotion already broke on the same object at the fork
	// point: reported, not failing this change (auditor promote refuses them).
	Inherited []Violation `json:"inherited,omitempty"`
	// ForkError says why the fork point's next promotion could not be judged (nothing is then
	// inherited).
	ForkError string      `json:"forkError,omitempty"`
	Warnings  []Violation `json:"warnings,omitempty"`
	// GPUStack is the GPU stack triple the env would run.
	GPUStack *gpustack.Triple `json:"gpuStack,omitempty"`
}

// nextPromotion judges env at head's overlay (pinObjs are what it renders at its pin), and at
// the fork point's and base's to tell the violations the change introduced from those it
// inherited.
func nextPromotion(base, fork, head *tree, env string, pinObjs []*unstructured.Unstructured) (*NextPromotion, error) {
	src, err := promoted(head, env)
	if err != nil {
		return nil, fmt.Errorf("%s, %s at next promotion: %w", head.describe(), env, err)
	}
	v, err := judge(head, src, env)
	if err != nil {
		return nil, fmt.Errorf("%s, %s at next promotion: %w", head.describe(), env, err)
	}
	n := &NextPromotion{Revision: head.snap.Revision, Changes: diffObjects(pinObjs, v.objects), Warnings: v.warnings, GPUStack: v.gpuStack}
	n.Warnings = append(n.Warnings, stackDrift(pinObjs, v.objects)...)
	var forkObjs []*unstructured.Unstructured
	var known []Violation
	fv, err := promotedFindings(fork, env)
	switch {
	case err != nil:
		n.ForkError = fmt.Sprintf("not judged before the change (%v): nothing is inherited", err)
	case fork != base:
		forkObjs = fv.objects
		if bv, err := promotedFindings(base, env); err != nil {
			n.ForkError = fmt.Sprintf("not judged at base (%v): nothing is inherited", err)
		} else {
			known = common(fv.violations, bv.violations)
		}
	default:
		forkObjs, known = fv.objects, fv.violations
	}
	n.Introduced = diffObjects(forkObjs, v.objects)
	n.Violations, n.Inherited = split(v.violations, known)
	if n.Changes == nil {
		n.Changes = []Change{}
	}
	if n.Introduced == nil {
		n.Introduced = []Change{}
	}
	return n, nil
}

// promotedFindings judges env as t's tree would run it promoted.
func promotedFindings(t *tree, env string) (*findings, error) {
	src, err := promoted(t, env)
	if err != nil {
		return nil, err
	}
	return judge(t, src, env)
}

// promoted is what env would render from if t's tree were promoted to it: t's overlay, with the
// kustomize patches of env's Application at t.
func promoted(t *tree, env string) (render.Source, error) {
	patches, err := release.ApplicationPatches(t.src, env)
	if err != nil {
		return render.Source{}, err
	}
	return t.src.WithPatches(env, patches)
}

// key identifies what a violation is about: its rule and object.
func (v Violation) key() string { return v.Rule + "\x00" + v.Object }

// fullKey identifies a violation across two renders: its rule, object and message.
func (v Violation) fullKey() string { return v.key() + "\x00" + v.Message }

// now is the clock the soak of a promotion is measured with.
var now = time.Now

// PromotionCheck is what moving a pinned env from one commit to another does, judged as auditor
// check judges it.
type PromotionCheck struct {
	// Changes are what the move changes in every Application of the env: its overlay and the
	// others of apps/<env> that render from the pin (its policies among them).
	Changes []Change
	// Violations are the rules the env breaks at the new commit; Warnings the notes.
	Violations, Warnings []Violation
}

// Promotion is what moving env's pin from oldRev to newRev does when the repository's branch is
// at head: env's overlay at each commit, with the patches of its Application at head, and the
// other Applications of apps/<env> at head (they are synced from the branch). Every rule runs on
// the env at newRev, with the admission policies there. `auditor promote` refuses a promotion
// with a violation.
func Promotion(repo *gitrepo.Repo, env, head, oldRev, newRev string) (*PromotionCheck, error) {
	t, err := treeAt(repo, head, "head")
	if err != nil {
		return nil, err
	}
	patches, err := release.ApplicationPatches(t.src, env)
	if err != nil {
		return nil, err
	}
	at := func(rev string) (render.Source, error) {
		src, _, err := snapshot(repo, rev)
		if err != nil {
			return render.Source{}, err
		}
		return src.WithPatches(env, patches)
	}
	oldSrc, err := at(oldRev)
	if err != nil {
		return nil, err
	}
	newSrc, err := at(newRev)
	if err != nil {
		return nil, err
	}
	v, err := judge(t, newSrc, env)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", env, gitrepo.Short(newRev), err)
	}
	out := &PromotionCheck{Violations: v.violations, Warnings: v.warnings}
	if out.Violations == nil {
		out.Violations = []Violation{}
	}
	var before []*unstructured.Unstructured
	if r, err := renderEnv(t, oldSrc, env); err == nil { // what runs now may not render any more
		before = r.objects()
	}
	out.Changes = diffObjects(before, v.objects)
	out.Warnings = append(out.Warnings, stackDrift(before, v.objects)...)
	if v.gpuStack != nil {
		table, err := stackTable(newSrc)
		if err != nil {
			return nil, err
		}
		var apps []*unstructured.Unstructured
		if r, err := appsOf(t.src, env); err == nil && r != nil {
			apps = r.Objects
		}
		var was *gpustack.Triple
		if s := stackOf(before, apps); !s.none() {
			tr := s.triple(table)
			was = &tr
		}
		out.Violations = append(out.Violations, soaked(t.snap, table, env, was, v.gpuStack, now())...)
	}
	return out, nil
}
