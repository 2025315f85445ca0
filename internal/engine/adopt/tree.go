package adopt

import (
	"context"
	"maps"
	"reflect"
	"slices"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// TreeFunc reads the repository's whole tree at a revision.
type TreeFunc func(revision string) (*gitrepo.Snapshot, error)

// tree is the repository at one revision as an adoption changes it.
type tree struct {
	snap    *gitrepo.Snapshot
	changed map[string][]byte // path → content after the change
	order   []string          // changed paths, in the order first changed
}

func newTree(snap *gitrepo.Snapshot) *tree {
	return &tree{snap: snap, changed: map[string][]byte{}}
}

// file is the content of a file as changed so far, and whether it exists.
func (t *tree) file(p string) ([]byte, bool) {
	if data, ok := t.changed[p]; ok {
		return data, true
	}
	data, ok := t.snap.Files[p]
	return data, ok
}

// with is a copy of t with one file more changed.
func (t *tree) with(p string, data []byte) *tree {
	out := &tree{snap: t.snap, changed: maps.Clone(t.changed), order: slices.Clone(t.order)}
	if _, ok := out.changed[p]; !ok {
		out.order = append(out.order, p)
	}
	out.changed[p] = data
	return out
}

// paths are the files of the tree, changed ones included.
func (t *tree) paths() []string {
	out := slices.Collect(maps.Keys(t.snap.Files))
	for _, p := range t.order {
		if _, ok := t.snap.Files[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// source is a render.Source of the tree as changed.
func (t *tree) source() (render.Source, error) {
	files := maps.Clone(t.snap.Files)
	maps.Copy(files, t.changed)
	return render.FromSnapshot(&gitrepo.Snapshot{Revision: t.snap.Revision, Files: files, Omitted: t.snap.Omitted, Symlinks: t.snap.Symlinks})
}

// render renders target with v from the tree as changed.
func (t *tree) render(target string, v render.Variant) (*render.Result, error) {
	src, err := t.source()
	if err != nil {
		return nil, err
	}
	return render.Engine{}.Render(context.Background(), src, render.Target{Name: target, Variant: v})
}

// changes are the files changed, as the diff writes them.
func (t *tree) changes() []fileChange {
	var out []fileChange
	for _, p := range t.order {
		before, existed := t.snap.Files[p]
		if existed && before == nil {
			before = []byte{}
		}
		if !reflect.DeepEqual(before, t.changed[p]) {
			out = append(out, fileChange{path: p, before: before, after: t.changed[p]})
		}
	}
	return out
}

// renderedObject is the object of a render that o is: same kind and name, and o's namespace or
// none (a chart's template that leaves it to the destination).
func renderedObject(res *render.Result, o drift.Object) map[string]any {
	for _, u := range res.Objects {
		if u.GetKind() == o.Kind && u.GetName() == o.Name && (u.GetNamespace() == o.Namespace || u.GetNamespace() == "") {
			return u.Object
		}
	}
	return nil
}

// changedOnly says whether after, a render of the same source as before with one value
// changed, differs from it only in drifted fields of objs, each then as before or its live
// value, and whether field f of o is then its live value.
func changedOnly(before, after *render.Result, objs []drift.Object, o drift.Object, f drift.Field) bool {
	if len(before.Objects) != len(after.Objects) {
		return false
	}
	if got, ok := valueAt(renderedObject(after, o), f); !ok || !equalValue(got, f.Live) {
		return false
	}
	for i, b := range before.Objects {
		a := after.Objects[i]
		if a.GetKind() != b.GetKind() || a.GetName() != b.GetName() || a.GetNamespace() != b.GetNamespace() {
			return false
		}
		bo, _ := normal(b.Object).(map[string]any)
		ao, _ := normal(a.Object).(map[string]any)
		for _, d := range objs {
			if d.Kind != b.GetKind() || d.Name != b.GetName() || (b.GetNamespace() != d.Namespace && b.GetNamespace() != "") {
				continue
			}
			for _, g := range d.Fields {
				els, err := pathElems(g)
				if err != nil {
					continue
				}
				vb, okb := valueAtElems(bo, els)
				va, oka := valueAtElems(ao, els)
				same := okb == oka && equalValue(va, vb)
				live := g.Change != drift.Removed && oka && equalValue(va, g.Live) || g.Change == drift.Removed && !oka
				if !same && !live {
					return false
				}
				deleteAt(bo, els)
				deleteAt(ao, els)
			}
		}
		if !reflect.DeepEqual(bo, ao) {
			return false
		}
	}
	return true
}

// equalValue says whether two values are the same as JSON says them.
func equalValue(a, b any) bool { return reflect.DeepEqual(normal(a), normal(b)) }
