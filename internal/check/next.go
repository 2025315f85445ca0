package check

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/release"
	"github.com/llm-gitops/platform/internal/render"
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
	// Introduced are the changes the checked change itself (base → head) makes to the next
	// promotion: none when it touches nothing the env renders.
	Introduced []Change `json:"introduced"`
	// Violations are the rules the next promotion breaks that it did not break at base: the
	// checked change introduced them, and it fails.
	Violations []Violation `json:"violations"`
	// Inherited are the rules the next promotion already broke at base: reported, not failing
	// this change (auditor promote refuses them).
	Inherited []Violation `json:"inherited,omitempty"`
	Warnings  []Violation `json:"warnings,omitempty"`
}

// nextPromotion judges env at head's overlay (pinObjs are what it renders at its pin), and at
// base's to tell the violations the change introduced from those it inherited.
func nextPromotion(base, head *tree, env string, pinObjs []*unstructured.Unstructured) (*NextPromotion, error) {
	src, err := promoted(head, env)
	if err != nil {
		return nil, fmt.Errorf("%s, %s at next promotion: %w", describeTree(head.snap), env, err)
	}
	v, err := judge(head, src, env)
	if err != nil {
		return nil, fmt.Errorf("%s, %s at next promotion: %w", describeTree(head.snap), env, err)
	}
	n := &NextPromotion{Revision: head.snap.Revision, Changes: diffObjects(pinObjs, v.objects), Violations: []Violation{}, Warnings: v.warnings}
	// Base's next promotion: a base that cannot be rendered inherits nothing.
	var baseObjs []*unstructured.Unstructured
	known := map[string]bool{}
	if src, err := promoted(base, env); err == nil {
		if bv, err := judge(base, src, env); err == nil {
			baseObjs = bv.objects
			for _, x := range bv.violations {
				known[x.key()] = true
			}
		}
	}
	n.Introduced = diffObjects(baseObjs, v.objects)
	for _, x := range v.violations {
		if known[x.key()] {
			n.Inherited = append(n.Inherited, x)
		} else {
			n.Violations = append(n.Violations, x)
		}
	}
	if n.Changes == nil {
		n.Changes = []Change{}
	}
	if n.Introduced == nil {
		n.Introduced = []Change{}
	}
	return n, nil
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

// key identifies a violation across two renders: its rule, object and message (a violation that
// got worse, "need 88 GPUs" where base needed 20, is a new one).
func (v Violation) key() string { return v.Rule + "\x00" + v.Object + "\x00" + v.Message }

// Promotion is what the rules say of env if the repository's tree at head were promoted to it
// with newRev as its pin: env's overlay at newRev, with the patches of its Application at head
// and the other Applications, policies, runbooks and profiles of head. `auditor promote` refuses
// a promotion with a violation.
func Promotion(repo *gitrepo.Repo, env, head, newRev string) (violations, warnings []Violation, err error) {
	t, err := treeAt(repo, head)
	if err != nil {
		return nil, nil, err
	}
	patches, err := release.ApplicationPatches(t.src, env)
	if err != nil {
		return nil, nil, err
	}
	at, _, err := snapshot(repo, newRev)
	if err != nil {
		return nil, nil, err
	}
	src, err := at.WithPatches(env, patches)
	if err != nil {
		return nil, nil, err
	}
	v, err := judge(t, src, env)
	if err != nil {
		return nil, nil, fmt.Errorf("%s at %s: %w", env, gitrepo.Short(newRev), err)
	}
	if v.violations == nil {
		v.violations = []Violation{}
	}
	return v.violations, v.warnings, nil
}
