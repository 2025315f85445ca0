package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// withGenerated adds to a unit's render the Applications its ApplicationSets generate, as their
// controller writes them: a hand edit of a generated Application is then drift of the unit that
// syncs the ApplicationSet, with its person, whatever the set's policy (create-only and
// ignoreApplicationDifferences leave such an edit standing). They are generated from the set the
// cluster holds, which its controller reads (the set's own difference from Git is the set's
// drift), with Git's exemptions (u.ignores). Under create-only and create-delete the template is
// compared all the same (Git says it), with a note (u.createOnly). A set whose Applications
// cannot be generated gets a note; their objects are still audited by their live spec. ns is
// the namespace scope gives an object the render gives none.
func (a *Auditor) withGenerated(ctx context.Context, u *unit, res *render.Result, ns string) (*render.Result, error) {
	var sets []*unstructured.Unstructured
	declared := map[string]bool{} // namespace/name of the Applications the render declares
	n := len(res.Objects)
	if res.Objects == nil {
		n = len(res.Raw)
	}
	inNS := func(o *unstructured.Unstructured) string {
		if o.GetNamespace() == "" {
			return ns
		}
		return o.GetNamespace()
	}
	for i := range n {
		if res.Objects == nil && !bytes.Contains(res.Raw[i], []byte(`"argoproj.io/`)) {
			continue // decoded only when it may be Argo CD's
		}
		obj := &unstructured.Unstructured{}
		if res.Objects != nil {
			obj = res.Objects[i]
		} else if err := obj.UnmarshalJSON(res.Raw[i]); err != nil {
			return nil, fmt.Errorf("%s: object %d of the render: %w", res.Env, i+1, err)
		}
		switch obj.GroupVersionKind().GroupKind() {
		case ApplicationSetGVK.GroupKind():
			sets = append(sets, obj)
		case argocd.ApplicationGVK.GroupKind():
			declared[inNS(obj)+"/"+obj.GetName()] = true
		}
	}
	var apps []*unstructured.Unstructured // added in one append: a render holds up to 10,000 objects
	for _, set := range sets {
		liveSet, err := a.Live.GetDirect(ctx, ApplicationSetGVK, inNS(set), set.GetName())
		var kerr *live.KindError
		switch {
		case apierrors.IsNotFound(err) || errors.As(err, &kerr):
			liveSet = nil // not synced yet: Git's is what its controller will read
		case err != nil:
			return nil, err
		}
		gen, err := argocd.Generate(set, liveSet, inNS(set))
		switch {
		case err != nil:
			u.notes = append(u.notes, fmt.Sprintf("ApplicationSet %s: its Applications could not be generated (%v): each is audited by its live spec alone", set.GetName(), err))
			continue
		case gen.Unsupported != "":
			u.notes = append(u.notes, fmt.Sprintf("ApplicationSet %s: %s, so a hand edit of the Applications it generates is not seen; their objects are audited", set.GetName(), gen.Unsupported))
			continue
		}
		added := map[string]bool{}
		for _, app := range gen.Applications {
			if declared[app.GetNamespace()+"/"+app.GetName()] {
				continue // Git declares it outright too: that manifest is compared
			}
			apps = append(apps, app)
			added[app.GetNamespace()+"/"+app.GetName()] = true
			if u.generated == nil {
				u.generated = map[drift.Ref]string{}
			}
			u.generated[drift.Ref{Group: argocd.ApplicationGVK.Group, Kind: argocd.ApplicationGVK.Kind, Namespace: app.GetNamespace(), Name: app.GetName()}] = set.GetName()
		}
		for _, ig := range gen.Ignores {
			if added[ig.Namespace+"/"+ig.Name] {
				u.ignores = append(u.ignores, ig)
			}
		}
		if !gen.Updates {
			if u.createOnly == nil {
				u.createOnly = map[string]bool{}
			}
			u.createOnly[set.GetName()] = true
		}
	}
	if len(apps) == 0 {
		return res, nil
	}
	return withObjects(res, apps...)
}

// generatedOptions narrows a unit's comparison options for the Applications its ApplicationSets
// generate: they are normalized by their set's exemptions alone, not by the unit's
// ignoreDifferences, which Argo CD applies to what the unit syncs.
func (u *unit) generatedOptions(opts *drift.Options) error {
	if len(u.generated) == 0 {
		return nil
	}
	set, err := argocd.IgnoreNormalizer(u.ignores)
	if err != nil {
		return err
	}
	opts.Normalizer = &splitNormalizer{generated: u.generated, set: set, unit: opts.Normalizer}
	return nil
}

// splitNormalizer normalizes a generated Application with its set's exemptions, any other
// object with the unit's.
type splitNormalizer struct {
	generated map[drift.Ref]string
	set, unit drift.Normalizer
}

func (s *splitNormalizer) Normalize(desired, live *unstructured.Unstructured, pt *typed.ParseableType) (*unstructured.Unstructured, *unstructured.Unstructured, error) {
	obj := desired
	if obj == nil {
		obj = live
	}
	if obj != nil {
		r := drift.Ref{Group: obj.GroupVersionKind().Group, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if _, ok := s.generated[r]; ok {
			return s.set.Normalize(desired, live, pt)
		}
	}
	if s.unit == nil {
		return desired, live, nil
	}
	return s.unit.Normalize(desired, live, pt)
}

// generatedVerdicts says of each generated Application in objs that no Application of Argo CD
// compares it (its set's controller writes it), instead of a verdict on it; and, under a policy
// that never updates it, that Git's template reaches it only when it is made again.
func (u *unit) generatedVerdicts(objs []drift.Object) {
	for i := range objs {
		o := &objs[i]
		set, ok := u.generated[drift.RefOfObject(o)]
		if !ok {
			continue
		}
		o.ArgoCD = &drift.ArgoVerdict{Source: drift.VerdictNone,
			Note: "generated by ApplicationSet " + set + ": no Application of Argo CD compares it; the set's controller writes it"}
		if u.createOnly[set] && o.Status == drift.Modified {
			note := "ApplicationSet " + set + " is create-only or create-delete: its controller never updates the Applications it made, so a change of Git's template reaches this one only when it is made again"
			o.Note = strings.TrimPrefix(o.Note+"; "+note, "; ")
		}
	}
}

// withoutGenerated leaves the generated Applications out of refs (no Argo CD verdict on them).
func (u *unit) withoutGenerated(refs []drift.Ref) []drift.Ref {
	if len(u.generated) == 0 {
		return refs
	}
	return slices.DeleteFunc(slices.Clone(refs), func(r drift.Ref) bool { _, ok := u.generated[r]; return ok })
}
