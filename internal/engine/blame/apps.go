package blame

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// maxNesting is how deep the search follows Applications that declare Applications (an
// app-of-apps under the env's root): the Applications the root syncs are level 1, those one of
// them declares level 2, and so on.
const maxNesting = 4

// has says whether the snapshot holds target: an env's overlay kustomization, or any file under
// an Application's path.
func has(snap *gitrepo.Snapshot, target string) bool {
	if !strings.HasPrefix(target, "@") {
		_, ok := snap.Files[render.OverlayPath(target)+"/kustomization.yaml"]
		return ok
	}
	prefix := render.TargetPath(target) + "/"
	for name := range snap.Files {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// ownOverlay says whether the env is walked in an overlay of its own at rev (overlays/<env>: the
// convention's env, or an env the layout file does not list whose overlay is there), else in its
// Applications: an env the repository's layout file lists (its layout.Env.Overlay is empty), or
// one it does not list, without an overlay, whose Applications the audit found
// (req.Applications). An env with neither is the overlay's, whose absence Git then reports. Only
// the layout file and the overlay's kustomization are read; a layout file that does not parse is
// an error unless the overlay is there.
func ownOverlay(repo *gitrepo.Repo, rev string, req Request) (bool, error) {
	_, err := repo.ReadFile(rev, render.OverlayPath(req.Env)+"/kustomization.yaml")
	overlay := err == nil
	data, err := repo.ReadFile(rev, layout.LayoutFile)
	switch {
	case errors.Is(err, fs.ErrNotExist): // the convention: an env is an overlay
	case err != nil:
		if !overlay {
			return false, fmt.Errorf("blame: env %s: %w", req.Env, err)
		}
	default:
		l, err := layout.Parse(data)
		switch {
		case err != nil && !overlay:
			return false, fmt.Errorf("blame: env %s at %.12s: %w", req.Env, rev, err)
		case err == nil && l.Envs != nil: // without envs, the file leaves them to the convention
			if _, listed := l.Env(req.Env); listed {
				return false, nil
			}
		}
	}
	return overlay || len(req.Applications) == 0, nil
}

// appHit is where a search found the object: the Application, its render target, the options
// it renders with at a revision (nil for none), its render, the object, and the namespace
// Argo CD puts it in when its render leaves it without one.
type appHit struct {
	app, target string
	variant     func(rev string) render.Variant
	res         *render.Result
	obj         *unstructured.Unstructured
	destNS      string
	// notes say what the walk in this Application must be read with.
	notes []string
}

// candidate is an Application a search looks in.
type candidate struct {
	AppPath
	variant func(rev string) render.Variant
	// level is how deep it is under the env's root (1: the root syncs it); the Applications
	// its render declares are looked in too while level < maxNesting.
	level int
	note  string
}

// appSearch is a search of the env's Applications at rev.
type appSearch struct {
	ctx     context.Context
	snaps   *gitrepo.Snapshots
	renders *render.Cache
	req     Request
	rev     string
	snap    *gitrepo.Snapshot
	// looked lists the Applications looked at, as "name (path)" and why one was not walked.
	looked []string
	named  map[string]bool
}

// inApplications looks for the object in the env's Applications as Git declares them at rev
// (the path its root syncs, as the layout says: apps/<env> in the convention), followed down
// into the Applications their renders declare (maxNesting levels), then in req.Applications.
// Each is rendered in turn with the options of its source Git declares (kustomize, Helm values
// for a chart of this repository, directory); one with a chart of a Helm repository, several
// sources, or a source the auditor cannot render is passed over, and so is a chart in
// req.Applications, whose values are not known here. skip is a path already looked in (the
// env's own overlay), "" for none.
//
// It returns the first Application that declares the object; else a NotDeclaredError listing
// the Applications looked at (Candidates set when one of them declares it more than once), and
// the error of the render of the root's path, when it did not render.
func inApplications(ctx context.Context, snaps *gitrepo.Snapshots, renders *render.Cache, req Request, rev, skip string) (*appHit, *NotDeclaredError, error) {
	nd := &NotDeclaredError{Ref: req.Object, Env: req.Env, Revision: rev, Applications: []string{}}
	snap, err := snaps.At(rev)
	if err != nil {
		return nil, nd, err
	}
	s := &appSearch{ctx: ctx, snaps: snaps, renders: renders, req: req, rev: rev, snap: snap, named: map[string]bool{}}
	var queue []candidate
	var rootErr error
	src, err := render.FromSnapshot(snap)
	if err == nil {
		var apps *render.Result
		if apps, err = render.Apps(ctx, render.Engine{}, src, req.Env); err == nil && apps != nil {
			queue = s.declared(apps.Objects, 1)
		}
	}
	if err != nil {
		rootErr = err
	}
	for _, a := range req.Applications {
		queue = append(queue, candidate{AppPath: a, level: 1})
	}
	tried := map[string]bool{}
	for i := 0; i < len(queue); i++ {
		c := queue[i]
		p := path.Clean(c.Path)
		if c.Path == "" || p == skip {
			continue
		}
		key := candidateKey(c, p, rev)
		if tried[key] {
			s.look(c.Name, p, "")
			continue
		}
		tried[key] = true
		if _, chart := snap.Files[path.Join(p, "Chart.yaml")]; chart && c.variant == nil {
			s.look(c.Name, p, "a chart whose values are not known here: not walked")
			continue // its render needs the Application's Helm values
		}
		t := render.AppTarget(c.Path)
		r, present, err := renderAt(ctx, snaps, renders, t, rev, c.variant)
		switch {
		case err != nil:
			s.look(c.Name, p, "did not render: "+firstLine(err.Error()))
			continue
		case !present:
			s.look(c.Name, p, "not in this repository")
			continue
		}
		s.look(c.Name, p, "")
		hit := &appHit{app: c.Name, target: t, variant: c.variant, res: r}
		if c.note != "" {
			hit.notes = []string{c.note}
		}
		o, err := find(r.Objects, req.Object, req.Env, rev)
		if err == nil {
			hit.obj = o
			return hit, nil, nil
		}
		if amb := (*NotDeclaredError)(nil); errors.As(err, &amb) && len(amb.Candidates) > 0 && nd.Candidates == nil {
			nd.Candidates = amb.Candidates
		}
		if c.Namespace != "" && req.Object.Namespace == c.Namespace {
			unset := req.Object
			unset.Namespace = ""
			if o, err := find(r.Objects, unset, req.Env, rev); err == nil && o.GetNamespace() == "" {
				hit.obj, hit.destNS = o, c.Namespace
				return hit, nil, nil
			}
		}
		if c.level < maxNesting {
			queue = append(queue, s.declared(r.Objects, c.level+1)...) // an app-of-apps: its Applications
		}
	}
	nd.Applications = s.looked
	return nil, nd, rootErr
}

// candidateKey is what a candidate at the clean path p is tried once by: its path, its namespace
// and, for a variant, the cache revision of its render at rev.
func candidateKey(c candidate, p, rev string) string {
	key := p + "\x00" + c.Namespace
	if c.variant != nil {
		k, _ := render.CacheRevision("", c.variant(rev))
		key += "\x00" + k
	}
	return key
}

// declared are the Applications among objs, as candidates of the given level; those the walk
// cannot render are listed as looked at, with the reason.
func (s *appSearch) declared(objs []*unstructured.Unstructured, level int) []candidate {
	var out []candidate
	for _, u := range objs {
		if u.GroupVersionKind().GroupKind() != argocd.ApplicationGVK.GroupKind() {
			continue
		}
		a, err := argocd.FromUnstructured(u)
		switch {
		case err != nil:
			s.look(u.GetName(), "", "not read: "+firstLine(err.Error()))
			continue
		case a.Chart != "":
			s.look(a.Name, "", fmt.Sprintf("chart %s of %s: not in this repository", a.Chart, a.RepoURL))
			continue
		case len(a.Sources) > 1:
			s.look(a.Name, "", fmt.Sprintf("%d sources: not walked", len(a.Sources)))
			continue
		case a.Unrenderable != "":
			s.look(a.Name, a.Path, a.Unrenderable+": not walked")
			continue
		case a.Path == "":
			s.look(a.Name, "", "no path: not walked")
			continue
		}
		if _, err := a.KustomizeOptions(s.rev); err != nil {
			s.look(a.Name, a.Path, "kustomize options: "+firstLine(err.Error()))
			continue
		}
		c := candidate{AppPath: AppPath{Name: a.Name, Path: a.Path, Namespace: a.DestinationNamespace}, level: level}
		_, chart := s.snap.Files[path.Join(path.Clean(a.Path), "Chart.yaml")]
		c.variant = sourceVariant(a, chart, s.rev)
		if len(a.KustomizeUnsupported) > 0 {
			c.note = fmt.Sprintf("Application %s sets kustomize options the auditor does not apply (%s): %s is walked without them",
				a.Name, strings.Join(a.KustomizeUnsupported, ", "), path.Clean(a.Path))
		}
		out = append(out, c)
	}
	return out
}

// sourceVariant is the options Argo CD's repo-server renders the Application's source path with
// at a revision, as Git declares them at head: its kustomize options and patches, its directory
// options, and, when its path holds a chart, its Helm values (value files, values, parameters;
// no destination cluster here: helm's default version and API versions). Nil when it sets none.
func sourceVariant(a *argocd.App, chart bool, head string) func(rev string) render.Variant {
	variant := func(rev string) render.Variant {
		k, _ := a.KustomizeOptions(rev) // its error was seen at head
		v := render.Variant{Kustomize: k, Patches: a.KustomizePatches, Directory: a.DirectoryOptions(rev)}
		if chart && v.Directory == nil { // a directory source, whatever its path holds
			v.Helm = a.HelmOptions(rev, argocd.Cluster{})
		}
		return v
	}
	if reflect.DeepEqual(variant(head), render.Variant{}) {
		return nil
	}
	return variant
}

// look notes an Application looked at: "name (path)", or "name (path: why)" when it was not
// walked; once per name.
func (s *appSearch) look(name, p, why string) {
	if name == "" || s.named[name] {
		return
	}
	s.named[name] = true
	in := p
	switch {
	case p == "":
		in = why
	case why != "":
		in = p + ": " + why
	}
	s.looked = append(s.looked, fmt.Sprintf("%s (%s)", name, in))
}
