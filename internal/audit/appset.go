package audit

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/render"
)

// withGenerated adds to a unit's render the Applications its ApplicationSets generate, as their
// controller writes them from Git's template: a hand edit of a generated Application is then
// drift of the unit that syncs the ApplicationSet, with its person, whatever the set's policy
// (create-only and ignoreApplicationDifferences leave such an edit standing). The set's
// ignoreApplicationDifferences are exemptions Git declares (u.ignores). A set whose generators
// need what the auditor does not read gets a note instead; its Applications' objects are still
// audited by their live spec. destNS is the namespace of an object the render gives none.
func (u *prepared) withGenerated(res *render.Result, destNS string) (*render.Result, error) {
	var sets []*unstructured.Unstructured
	declared := map[string]bool{} // namespace/name of the Applications the render declares
	n := len(res.Objects)
	if res.Objects == nil {
		n = len(res.Raw)
	}
	for i := range n {
		o := res.Objects
		if o == nil && !bytes.Contains(res.Raw[i], []byte(`"argoproj.io/`)) {
			continue // decoded only when it may be Argo CD's
		}
		var obj *unstructured.Unstructured
		if o != nil {
			obj = o[i]
		} else {
			obj = &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(res.Raw[i]); err != nil {
				return nil, fmt.Errorf("%s: object %d of the render: %w", res.Env, i+1, err)
			}
		}
		switch obj.GroupVersionKind().GroupKind() {
		case ApplicationSetGVK.GroupKind():
			sets = append(sets, obj)
		case argocd.ApplicationGVK.GroupKind():
			declared[obj.GetNamespace()+"/"+obj.GetName()] = true
		}
	}
	for _, set := range sets {
		gen, err := argocd.Generate(set)
		switch {
		case err != nil:
			u.notes = append(u.notes, fmt.Sprintf("ApplicationSet %s: its Applications could not be generated (%v): each is audited by its live spec alone", set.GetName(), err))
			continue
		case gen.Unsupported != "":
			u.notes = append(u.notes, fmt.Sprintf("ApplicationSet %s: %s, so a hand edit of the Applications it generates is not seen; their objects are audited", set.GetName(), gen.Unsupported))
			continue
		}
		for _, app := range gen.Applications {
			if declared[app.GetNamespace()+"/"+app.GetName()] {
				continue // Git declares it outright too: that manifest is compared
			}
			if res, err = withObject(res, app); err != nil {
				return nil, err
			}
			if u.generated == nil {
				u.generated = map[drift.Ref]bool{}
			}
			ns := app.GetNamespace()
			if ns == "" {
				ns = destNS // as scope places it
			}
			u.generated[drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: ns, Name: app.GetName()}] = true
		}
		u.ignores = append(u.ignores, gen.Ignores...)
	}
	return res, nil
}
