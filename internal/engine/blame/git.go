package blame

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// Request says what to blame.
type Request struct {
	Env    string
	Object Ref
	// Revision is where the walk starts; empty: the branch head (HEAD, or main for a clone).
	Revision string
	// MaxCommits bounds the first-parent commits looked at (<= 0: DefaultMaxCommits).
	MaxCommits int
	// Applications are the env's Applications as its audit found them (the live group: a root's
	// tree, a selection), looked in, in turn, when neither the overlay nor the Applications Git
	// declares in the path the env's root syncs (apps/<env> in the convention) have the object.
	Applications []AppPath
}

// AppPath is an Application and the path of this repository its source renders. Namespace, when
// set, is its destination namespace: where Argo CD puts the objects its render leaves without one.
type AppPath struct {
	Name, Path, Namespace string
}

// Options are the walk's collaborators; the zero value works.
type Options struct {
	// Renders caches renders by what they read: a commit that changed nothing the env reads costs
	// no kustomize run. Nil: an in-memory cache for this walk. Results are not changed, so a
	// cache with Shared set serves them.
	Renders *render.Cache
	// Types gives the schema of a kind (the cluster's, see ClusterTypes). Nil, or nil for a kind:
	// the Kubernetes API compiled in; kinds it lacks (CRDs) are compared with deduced types (maps
	// by key, lists whole).
	Types func(schema.GroupVersionKind) *typed.ParseableType
}

// Git walks the env's first-parent history back from req.Revision and gives every field Git
// declares for the object the commit that last changed its rendered value. The walk stops at the
// commit that added the object to the env (where the overlay or the object is absent), at the
// first commit of the repository, or after MaxCommits commits.
//
// The env is walked as the repository's layout says at the head of the walk: an env of the
// convention in its overlay (overlays/<env>), then, for an object the overlay does not declare,
// in the Application that renders it; an env the layout file (.auditor.yaml) lists, which has
// no overlay of its own, in the path of the Application that renders the object, found among the
// Applications its root syncs (followed down into app-of-apps) and req.Applications. An object
// none of them renders is a NotDeclaredError naming them.
func Git(ctx context.Context, repo *gitrepo.Repo, req Request, opts Options) (*Blame, error) {
	max := req.MaxCommits
	if max <= 0 {
		max = DefaultMaxCommits
	}
	renders := opts.Renders
	if renders == nil {
		renders = render.NewCache("", 2)
		renders.Shared = true
	}
	commits, err := repo.FirstParents(ctx, req.Revision, max)
	if err != nil {
		return nil, err
	}
	head := commits[0]
	snaps := repo.Snapshots() // each commit reads only the trees and files it changed
	own, err := ownOverlay(repo, head.Hash, req)
	if err != nil {
		return nil, err
	}
	target := req.Env
	var variant func(string) render.Variant // an Application's options, when it is one's path
	var res *render.Result
	var obj *unstructured.Unstructured
	var notes []string
	app, destNS := "", ""
	if own {
		var present bool
		if res, present, err = renderAt(ctx, snaps, renders, target, head.Hash, variant); err != nil {
			return nil, err
		}
		if !present {
			return nil, fmt.Errorf("blame: env %s has no overlay at %.12s (%s)", req.Env, head.Hash, render.OverlayPath(req.Env))
		}
		obj, err = find(res.Objects, req.Object, req.Env, head.Hash)
		var notDeclared *NotDeclaredError
		if errors.As(err, &notDeclared) && len(notDeclared.Candidates) == 0 {
			// Not the overlay's: the env's other Applications, as Git declares them, in turn.
			if hit, _, _ := inApplications(ctx, snaps, renders, req, head.Hash, render.OverlayPath(req.Env)); hit != nil {
				app, target, variant, res, obj, destNS, notes, err = hit.app, hit.target, hit.variant, hit.res, hit.obj, hit.destNS, hit.notes, nil
			}
		}
		if err != nil {
			return nil, err
		}
	} else {
		// No overlay of its own (a layout of .auditor.yaml): the Application that renders it.
		hit, nd, rootErr := inApplications(ctx, snaps, renders, req, head.Hash, "")
		switch {
		case hit == nil && rootErr != nil:
			return nil, fmt.Errorf("blame: env %s: the Applications its root syncs at %.12s: %w", req.Env, head.Hash, rootErr)
		case hit == nil:
			return nil, nd
		}
		app, target, variant, res, obj, destNS, notes = hit.app, hit.target, hit.variant, hit.res, hit.obj, hit.destNS, hit.notes
	}
	gvk := obj.GroupVersionKind()
	pt := typeOf(gvk, opts.Types)
	b := &Blame{Env: req.Env, Application: app, Path: render.TargetPath(target), Revision: head.Hash, Writes: []Write{},
		Object: Object{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}, Notes: notes}
	if b.Object.Namespace == "" {
		b.Object.Namespace = destNS // where Argo CD put it; the walk finds it without one
	}
	leaves := leafPaths(obj.Object, pt)
	commitOf := make([]*Commit, len(leaves))
	pending := len(leaves)
	// newer is the last rendering looked at, made at commit at; each older rendering that differs
	// at a pending field gives that field the commit at.
	newer, newerDigest, at := obj, res.Digest, head
	b.History.Commits = 1
	oldest := head
	blameAll := func(boundary bool) {
		for i := range commitOf {
			if commitOf[i] == nil {
				commitOf[i] = commitFrom(at, boundary)
			}
		}
		pending = 0
	}
	for _, c := range commits[1:] {
		if pending == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b.History.Commits++
		oldest = c
		res, present, err := renderAt(ctx, snaps, renders, target, c.Hash, variant)
		if err != nil {
			b.History.Skipped = append(b.History.Skipped, Skipped{Commit: c.Hash, Error: err.Error()})
			continue
		}
		var older *unstructured.Unstructured
		if present {
			older = findExact(res.Objects, gvk.GroupKind(), obj.GetNamespace(), obj.GetName())
		}
		if older == nil { // at commit at the object came into the env
			b.History.Complete = true
			blameAll(false)
			break
		}
		if res.Digest != newerDigest {
			changed := drift.CompareRendered(older.Object, newer.Object, pt)
			for i, leaf := range leaves {
				if commitOf[i] == nil && touches(changed, leaf) {
					commitOf[i] = commitFrom(at, false)
					pending--
				}
			}
		}
		newer, newerDigest, at = older, res.Digest, c
	}
	b.History.Oldest = oldest.Hash
	switch {
	case pending > 0:
		// The oldest commit rendered set what is left: exactly, when it is the repository's first.
		root := len(oldest.Parents) == 0 && at.Hash == oldest.Hash
		b.History.Complete = root
		blameAll(!root)
	case !b.History.Complete:
		b.History.Complete = true // every field changed within the walk
	}
	for _, s := range b.History.Skipped {
		b.Notes = append(b.Notes, fmt.Sprintf("%s did not render at %.12s (skipped; a change across it is given to the newer commit): %s", b.Path, s.Commit, firstLine(s.Error)))
	}
	secret := gvk.Group == "" && gvk.Kind == "Secret"
	for i, leaf := range leaves {
		v, _ := drift.ValueAt(obj.Object, drift.FieldPath(leaf))
		if secret && secretValue(leaf) {
			v = Redacted // as in the drift report: a Secret's values are never shown
		}
		b.Fields = append(b.Fields, Field{Path: drift.Display(leaf), FieldPath: drift.FieldPath(leaf), Git: v, Commit: commitOf[i]})
	}
	return b, nil
}

// renderAt renders target (an env, or render.AppTarget of an Application's path) at a commit,
// with the options variant gives for it (nil: none); present is false when the commit does not have it (before the env or the path was made).
func renderAt(ctx context.Context, snaps *gitrepo.Snapshots, renders *render.Cache, target, rev string, variant func(string) render.Variant) (res *render.Result, present bool, err error) {
	env := target
	var v render.Variant
	if variant != nil {
		v = variant(rev)
	}
	key, err := render.CacheRevision(rev, v)
	if err != nil {
		return nil, true, err
	}
	if res, ok := renders.ByRevision(env, key); ok {
		return res, true, nil
	}
	snap, err := snaps.At(rev)
	if err != nil {
		return nil, false, err
	}
	if !has(snap, target) {
		return nil, false, nil
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return nil, true, err
	}
	res, err = render.Engine{Cache: renders}.Render(ctx, src, render.Target{Name: env, Variant: v})
	if err != nil {
		return nil, true, fmt.Errorf("%s at %.12s: %w", env, rev, err)
	}
	return res, true, nil
}

// find picks the object ref names among the rendered ones.
func find(objs []*unstructured.Unstructured, ref Ref, env, rev string) (*unstructured.Unstructured, error) {
	var found []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if o.GetName() != ref.Name || !kindMatches(ref.Kind, gvk.Kind) || ref.Group != "" && !strings.EqualFold(ref.Group, gvk.Group) ||
			ref.Namespace != "" && o.GetNamespace() != ref.Namespace {
			continue
		}
		found = append(found, o)
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, &NotDeclaredError{Ref: ref, Env: env, Revision: rev}
	}
	e := &NotDeclaredError{Ref: ref, Env: env, Revision: rev}
	for _, o := range found {
		e.Candidates = append(e.Candidates, Object{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}.String())
	}
	sort.Strings(e.Candidates)
	return nil, e
}

// kindMatches says whether what a person typed names kind: the kind or its plural, any case.
func kindMatches(typed, kind string) bool {
	return strings.EqualFold(typed, kind) || strings.EqualFold(typed, kind+"s") || strings.EqualFold(typed, kind+"es") ||
		strings.HasSuffix(kind, "y") && strings.EqualFold(typed, kind[:len(kind)-1]+"ies")
}

// findExact is the object of a group, kind, namespace and name (any version: an apiVersion
// change is a change of the object, not another one).
func findExact(objs []*unstructured.Unstructured, gk schema.GroupKind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetName() == name && o.GetNamespace() == namespace && o.GroupVersionKind().GroupKind() == gk {
			return o
		}
	}
	return nil
}

func typeOf(gvk schema.GroupVersionKind, types func(schema.GroupVersionKind) *typed.ParseableType) *typed.ParseableType {
	if types != nil {
		if pt := types(gvk); pt != nil {
			return pt
		}
	}
	return argocd.StaticSchema([]schema.GroupVersionKind{gvk}).Type(gvk)
}

// leafPaths lists the leaf fields of obj by its type (an atomic list or map is one leaf), sorted
// as the report sorts them; status is not Git's.
func leafPaths(obj map[string]any, pt *typed.ParseableType) []fieldpath.Path {
	if pt == nil {
		pt = &typed.DeducedParseableType
	}
	tv, err := pt.FromUnstructured(obj, typed.AllowDuplicates)
	if err != nil && pt != &typed.DeducedParseableType {
		tv, err = typed.DeducedParseableType.FromUnstructured(obj, typed.AllowDuplicates)
	}
	var set *fieldpath.Set
	if err == nil {
		set, err = tv.ToFieldSet()
	}
	if err != nil {
		return []fieldpath.Path{{}} // not even deduced types: the object is one value
	}
	var out []fieldpath.Path
	set.Leaves().Iterate(func(p fieldpath.Path) {
		if len(p) > 0 && p[0].FieldName != nil && *p[0].FieldName == "status" {
			return
		}
		out = append(out, p.Copy())
	})
	sort.Slice(out, func(i, j int) bool { return drift.Display(out[i]) < drift.Display(out[j]) })
	return out
}

// touches says whether a change is at leaf, above it (a container added) or under it (an item
// of an atomic list).
func touches(changes []drift.FieldChange, leaf fieldpath.Path) bool {
	for _, c := range changes {
		p := c.FieldPath.Path()
		if hasPrefix(leaf, p) || hasPrefix(p, leaf) {
			return true
		}
	}
	return false
}

// hasPrefix says whether p starts with prefix.
func hasPrefix(p, prefix fieldpath.Path) bool {
	if len(prefix) > len(p) {
		return false
	}
	for i := range prefix {
		if !prefix[i].Equals(p[i]) {
			return false
		}
	}
	return true
}

// Redacted stands for the value of a Secret's key.
const Redacted = "(redacted)"

// secretValue says whether a path of a Secret holds a value (data, stringData).
func secretValue(p fieldpath.Path) bool {
	return len(p) > 0 && p[0].FieldName != nil && (*p[0].FieldName == "data" || *p[0].FieldName == "stringData")
}

func commitFrom(c gitrepo.Commit, boundary bool) *Commit {
	return &Commit{SHA: c.Hash, Author: c.Author.Name, Email: c.Author.Email, Date: c.Author.When.UTC(), Subject: c.Subject, Boundary: boundary}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
