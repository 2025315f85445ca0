package audit

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// grow adds to units (prepared already) the Applications they declare, followed down; those the
// ApplicationSets among them generated; then those the env's selection picks, followed down too.
// repoURL is the repository the auditor reads.
func (a *Auditor) grow(ctx context.Context, req Request, units []*unit, repoURL string, lap func(string)) ([]*unit, error) {
	seen := map[string]bool{}
	for _, u := range units {
		seen[u.ns(a)+"/"+u.name] = true
	}
	// full says the group has as many Applications as it audits, with pending ones found: the
	// next one is not rendered.
	full := func(pending int, ns, name string) bool {
		return len(units)+pending >= a.MaxApplications && (ns != a.AppNamespace || name != a.AppName(req.Env))
	}
	beyond := func(ns, name, parent, via string) *unit {
		return &unit{key: a.unitKey(req.Env, ns, name), name: name, appNS: ns, parent: parent, via: via, role: roleMember,
			err: &unitError{msg: fmt.Sprintf("Application %s: not audited: the group has more than %d Applications, the most one audit renders", name, a.MaxApplications)}}
	}
	listed := map[string][]*unstructured.Unstructured{}
	follow := func(queue []*unit) error {
		for ; len(queue) > 0; queue = queue[1:] {
			parent := queue[0]
			if parent.err != nil || parent.idx == nil {
				continue
			}
			for _, r := range parent.idx.Refs() {
				if r.Group != argocd.ApplicationGVK.Group {
					continue
				}
				var found []*unit
				switch r.Kind {
				case argocd.ApplicationGVK.Kind:
					if _, gen := parent.generated[r]; gen || seen[r.Namespace+"/"+r.Name] {
						continue
					}
					seen[r.Namespace+"/"+r.Name] = true
					if full(len(found), r.Namespace, r.Name) {
						found = append(found, beyond(r.Namespace, r.Name, parent.ref(a), ""))
						continue
					}
					u, err := a.member(ctx, req, parent, repoURL, r, lap)
					if err != nil {
						return err
					}
					found = append(found, u)
				case ApplicationSetGVK.Kind:
					apps, err := a.generated(ctx, r, listed)
					if err != nil {
						return err
					}
					for _, app := range apps {
						if seen[app.Namespace+"/"+app.Name] {
							continue
						}
						seen[app.Namespace+"/"+app.Name] = true
						if full(len(found), app.Namespace, app.Name) {
							found = append(found, beyond(app.Namespace, app.Name, parent.ref(a), "ApplicationSet "+r.Name))
							continue
						}
						u, err := a.discovered(ctx, req, app, parent.ref(a), "ApplicationSet "+r.Name, repoURL, lap)
						if err != nil {
							return err
						}
						found = append(found, u)
					}
				}
				for _, u := range found {
					units = append(units, u)
					queue = append(queue, u)
				}
			}
		}
		return nil
	}
	if err := follow(slices.Clone(units)); err != nil {
		return nil, err
	}
	sel := a.selection(req.Env)
	if sel == nil {
		return units, nil
	}
	apps, err := a.selected(ctx, sel)
	if err != nil {
		return nil, err
	}
	var picked []*unit
	for _, app := range apps {
		if seen[app.Namespace+"/"+app.Name] || a.otherEnvs(req.Env, app.Namespace, app.Name) {
			continue
		}
		seen[app.Namespace+"/"+app.Name] = true
		if full(0, app.Namespace, app.Name) {
			units = append(units, beyond(app.Namespace, app.Name, "", "selection"))
			continue
		}
		u, err := a.discovered(ctx, req, app, "", "selection", repoURL, lap)
		if err != nil {
			return nil, err
		}
		units = append(units, u)
		picked = append(picked, u)
	}
	if err := follow(picked); err != nil {
		return nil, err
	}
	if len(units) > 1 {
		for _, u := range units {
			if u.role == roleAlone {
				u.role = roleOwn // the env's own Application too: its namespaces are shared
			}
		}
	}
	return units, nil
}

// member prepares Application r that parent declares. What keeps it from being audited is its
// err; only what stops the env's audit (the env's own Application failing, a background render)
// is returned.
func (a *Auditor) member(ctx context.Context, req Request, parent *unit, repoURL string, r drift.Ref, lap func(string)) (*unit, error) {
	u := &unit{key: a.unitKey(req.Env, r.Namespace, r.Name), name: r.Name, appNS: r.Namespace, parent: parent.ref(a), role: roleMember}
	d, ok := parent.idx.Desired(r)
	if !ok {
		return nil, fmt.Errorf("Application %s is not in %s's render", r.Name, parent.name)
	}
	if u.git, u.err = argocd.FromUnstructured(d); u.err != nil {
		if r.Name == a.AppName(req.Env) && r.Namespace == a.AppNamespace {
			return nil, u.err // the env's own Application: its error is the env's
		}
		return u, nil
	}
	u.target = render.AppTarget(u.git.Path)
	if r.Name == a.AppName(req.Env) && r.Namespace == a.AppNamespace {
		u.key, u.role = req.Env, roleOwn
		if path.Clean(u.git.Path) == render.OverlayPath(req.Env) {
			u.target = req.Env
		}
	}
	u.foreign = u.git.Chart == "" && !argocd.SameRepo(u.git.RepoURL, repoURL)
	if u.foreign && a.RepoServer == nil && u.git.Unrenderable == "" {
		u.err = &unitError{msg: fmt.Sprintf("Application %s: its source is another repository (%s); the auditor reads %s", u.name, u.git.RepoURL, repoURL)}
		return u, nil
	}
	if u.app, u.err = a.application(ctx, r.Namespace, r.Name); u.err != nil {
		if u.own() || ctx.Err() != nil {
			return nil, u.err
		}
		return u, nil
	}
	err := a.prepare(ctx, req, u, lap)
	var rendering *RenderingError
	switch {
	case err == nil:
	case ctx.Err() != nil: // cancelled: no verdict on this Application, nor on the env
		return nil, ctx.Err()
	case errors.As(err, &rendering), u.own() && !isUnitError(err):
		return nil, err
	default:
		u.err = err
	}
	return u, nil
}

func isUnitError(err error) bool {
	var ue *unitError
	return errors.As(err, &ue)
}
