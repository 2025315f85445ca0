package blame

import (
	"context"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/render"
)

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

// inApplications looks for the object in the env's other Applications as Git declares them at
// rev (apps/<env>), then in req.Applications: each with one source, a path of this repository and
// no Helm chart, rendered in turn. It returns the first that declares the object, its render
// target, the options it renders with at a revision (nil for none: Git's directory options) and
// render; obj is nil when none does. An object its render leaves without a namespace is found in
// the Application's destination namespace, which destNS then says.
func inApplications(ctx context.Context, snaps *gitrepo.Snapshots, renders *render.Cache, req Request, rev string) (app, target string, variant func(rev string) render.Variant, res *render.Result, obj *unstructured.Unstructured, destNS string) {
	snap, err := snaps.At(rev)
	if err != nil {
		return "", "", nil, nil, nil, ""
	}
	var candidates []AppPath
	variants := map[AppPath]func(string) render.Variant{}
	if src, err := render.FromSnapshot(snap); err == nil {
		if apps, err := render.Apps(ctx, render.Engine{}, src, req.Env); err == nil && apps != nil {
			for _, u := range apps.Objects {
				if u.GroupVersionKind().GroupKind() != argocd.ApplicationGVK.GroupKind() {
					continue
				}
				a, err := argocd.FromUnstructured(u)
				if err != nil || a.Chart != "" || len(a.Sources) > 1 || a.Unrenderable != "" {
					continue
				}
				c := AppPath{Name: a.Name, Path: a.Path, Namespace: a.DestinationNamespace}
				candidates = append(candidates, c)
				if a.DirectoryOptions("") != nil {
					variants[c] = func(rev string) render.Variant { return render.Variant{Directory: a.DirectoryOptions(rev)} }
				}
			}
		}
	}
	candidates = append(candidates, req.Applications...)
	tried := map[AppPath]bool{}
	for _, a := range candidates {
		p := path.Clean(a.Path)
		if a.Path == "" || p == render.OverlayPath(req.Env) || tried[AppPath{Path: p, Namespace: a.Namespace}] {
			continue
		}
		tried[AppPath{Path: p, Namespace: a.Namespace}] = true
		v := variants[a]
		if _, chart := snap.Files[path.Join(p, "Chart.yaml")]; chart && v == nil {
			continue // its render needs the Application's Helm values: not walked here
		}
		t := render.AppTarget(a.Path)
		r, present, err := renderAt(ctx, snaps, renders, t, rev, v)
		if err != nil || !present {
			continue
		}
		o, err := find(r.Objects, req.Object, req.Env, rev)
		if err == nil {
			return a.Name, t, v, r, o, ""
		}
		if a.Namespace != "" && req.Object.Namespace == a.Namespace {
			unset := req.Object
			unset.Namespace = ""
			if o, err := find(r.Objects, unset, req.Env, rev); err == nil && o.GetNamespace() == "" {
				return a.Name, t, v, r, o, a.Namespace
			}
		}
	}
	return "", "", nil, nil, nil, ""
}
