package adopt

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Dir says where the drifted fields of o are adopted: the kustomization directory its
// Application renders (o.Source; overlays/<env> for an object that names none), or, when that is
// no kustomization of this repository, why nothing is written ("" and the reason).
func Dir(env string, o drift.Object, read ReadFunc) (dir, why string, err error) {
	src := o.Source
	if src == "" {
		return path.Join("overlays", env), "", nil
	}
	switch ext := path.Ext(src); {
	case strings.HasPrefix(src, "Helm chart "):
		return "", fmt.Sprintf("its Application %s renders the %s: set the value in its values (the Application's valuesObject or a values file)", o.Application, src), nil
	case strings.Contains(src, " "):
		return "", fmt.Sprintf("its Application %s renders %s: no patch is written for it; change it there", o.Application, src), nil
	case ext == ".yaml" || ext == ".yml" || ext == ".json":
		return "", fmt.Sprintf("it is declared in %s, applied by hand: edit it there", src), nil
	}
	for _, name := range slices.Concat(kustomizationNames, []string{"Chart.yaml"}) {
		_, err := read(path.Join(src, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return "", "", fmt.Errorf("read %s: %w", path.Join(src, name), err)
		case name == "Chart.yaml":
			return "", fmt.Sprintf("its Application %s renders the Helm chart %s: set the value in its values (the Application's valuesObject or a values file)", o.Application, src), nil
		}
		return src, "", nil
	}
	return "", fmt.Sprintf("its Application %s renders the plain directory %s: edit the object's file there", o.Application, src), nil
}

// ReadAtFunc reads a file of the repository at a revision.
type ReadAtFunc func(revision, name string) ([]byte, error)

// Repo is the repository GroupIn reads.
type Repo struct {
	// ReadAt reads one file at a revision.
	ReadAt ReadAtFunc
	// Tree reads the whole tree at a revision: what an Application's chart or kustomization is
	// rendered from to find the option that sets a drifted value. Nil: such a value is named in
	// a note, not adopted.
	Tree TreeFunc
}

// Group is GroupIn without the trees: what an Application's own options set is a note.
func Group(env, revision string, readAt ReadAtFunc, objs ...drift.Object) (*Adoption, error) {
	return GroupIn(env, revision, Repo{ReadAt: readAt}, objs...)
}

// GroupIn adopts objs where their Applications render them, reading each at the revision its
// Application was rendered at (the object's Revision, else revision): into the kustomization
// of each one's Application (Dir), or, for an Application that renders them with its own
// options (a Helm chart, kustomize options, several sources) and repo.Tree, into the value or
// option that sets each drifted field, in the Application's manifest or a value file it names
// (see adoptOptions). One Adoption whose Diff holds every change, and whose Notes name what is
// not adopted and why, and which files were read at another revision than revision.
func GroupIn(env, revision string, repo Repo, objs ...drift.Object) (*Adoption, error) {
	readAt := repo.ReadAt
	type at struct{ dir, rev string }
	byDir := map[at][]drift.Object{}
	var dirs []at
	type app struct{ name, source, rev, why string }
	byApp := map[app][]drift.Object{}
	var apps []app
	out := &Adoption{}
	for _, o := range objs {
		rev := revision
		if o.Revision != "" {
			rev = o.Revision
		}
		read := func(name string) ([]byte, error) { return readAt(rev, name) }
		dir, why, err := Dir(env, o, read)
		if err != nil {
			return nil, err
		}
		if why != "" && repo.Tree != nil && byOptions(o) {
			k := app{o.Application, o.Source, rev, why}
			if _, ok := byApp[k]; !ok {
				apps = append(apps, k)
			}
			byApp[k] = append(byApp[k], o)
			continue
		}
		if why != "" {
			out.Notes = append(out.Notes, fmt.Sprintf("%s %s/%s: %s", o.Kind, o.Namespace, o.Name, why))
			continue
		}
		k := at{dir, rev}
		if _, ok := byDir[k]; !ok {
			dirs = append(dirs, k)
		}
		byDir[k] = append(byDir[k], o)
	}
	for _, k := range dirs {
		a, err := PatchIn(k.dir, func(name string) ([]byte, error) { return readAt(k.rev, name) }, byDir[k]...)
		if err != nil {
			return nil, err
		}
		if k.rev != revision {
			out.Notes = append(out.Notes, fmt.Sprintf("the patch of %s is written against %.12s, the revision its Application syncs", k.dir, k.rev))
		}
		out.Fields += a.Fields
		out.Notes = append(out.Notes, a.Notes...)
		out.Diff += a.Diff
	}
	trees := map[string]*tree{}
	var revs []string
	for _, k := range apps {
		t, ok := trees[k.rev]
		if !ok {
			snap, err := repo.Tree(k.rev)
			if err != nil {
				return nil, fmt.Errorf("read the tree at %.12s: %w", k.rev, err)
			}
			t = newTree(snap)
			trees[k.rev], revs = t, append(revs, k.rev)
		}
		n, notes := adoptOptions(t, byApp[k], k.why)
		out.Fields += n
		out.Notes = append(out.Notes, notes...)
	}
	if err := out.addTreeDiffs(trees, revs, revision); err != nil {
		return nil, err
	}
	return out, nil
}

// addTreeDiffs adds to out the unified diff of the changes in each tree, in the order of revs,
// with a note for each written against a revision other than revision.
func (out *Adoption) addTreeDiffs(trees map[string]*tree, revs []string, revision string) error {
	for _, rev := range revs {
		changes := trees[rev].changes()
		if len(changes) == 0 {
			continue
		}
		d, err := unifiedDiff(changes)
		if err != nil {
			return fmt.Errorf("adopt patch: %w", err)
		}
		if rev != revision {
			var files []string
			for _, c := range changes {
				files = append(files, c.path)
			}
			out.Notes = append(out.Notes, fmt.Sprintf("the change of %s is written against %.12s, the revision its Application syncs", strings.Join(files, ", "), rev))
		}
		out.Diff += d
	}
	return nil
}
