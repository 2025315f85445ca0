package check

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/layout"
	"github.com/llm-gitops/platform/internal/render"
)

// layouts keeps the layout read at each commit (a check reads a few).
var layouts sync.Map // commit → *layout.Layout

// layoutOf is the layout of the repository src reads (layout.Read).
func layoutOf(src render.Source) (*layout.Layout, error) {
	rev := src.Revision()
	if rev != "" {
		if l, ok := layouts.Load(rev); ok {
			return l.(*layout.Layout), nil
		}
	}
	l, err := layout.Read(src)
	if err != nil {
		return nil, err
	}
	if rev != "" {
		layouts.Store(rev, l)
	}
	return l, nil
}

// layoutEnv is env as src's layout says; an env it does not list has no Applications there.
func layoutEnv(src render.Source, env string) (layout.Env, error) {
	l, err := layoutOf(src)
	if err != nil {
		return layout.Env{}, err
	}
	if e, ok := l.Env(env); ok {
		return e, nil
	}
	return layout.Env{Name: env}, nil
}

// appsOf renders what env's root syncs at src (render.Apps); nil when src has no such path.
func appsOf(src render.Source, env string) (*render.Result, error) {
	return render.Apps(context.Background(), render.Engine{}, src, env)
}

// silence sorts findings into those that count in env and those the layout turns off there
// (each with its reason, for the report).
func silence(l *layout.Layout, env string, found []Violation) (kept []Violation, off []Silenced) {
	for _, v := range found {
		if why := l.Off(v.Rule, env); why != "" {
			off = append(off, Silenced{Violation: v, Reason: why})
			continue
		}
		kept = append(kept, v)
	}
	return kept, off
}

// Silenced is a finding of a rule the repository's layout turns off in the env, with its reason.
type Silenced struct {
	Violation
	Reason string `json:"reason"`
}

// Applications renders env's group from Git at src as Argo CD would, for a layout whose env has
// no overlay of its own: what its root syncs (the Applications themselves, first) and each
// Application's objects, by Application. What it cannot render is an error naming each one;
// an Application it does not render (a chart repository, another repository) is listed in apps
// with the reason.
func Applications(src render.Source, env string) (objs []*unstructured.Unstructured, apps []AppRender, err error) {
	e, err := layoutEnv(src, env)
	if err != nil {
		return nil, nil, err
	}
	root, err := appsOf(src, env)
	if err != nil {
		return nil, nil, err
	}
	if root == nil {
		return nil, nil, fmt.Errorf("%s: no path its root syncs (apps, or rootManifest, in %s)", env, layout.LayoutFile)
	}
	other, apps, violations, _, err := otherApplications(src, src, e)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, v := range violations {
		errs = append(errs, fmt.Errorf("%s: %s", v.Object, v.Message))
	}
	objs = append(objs, root.Objects...)
	for _, o := range other {
		objs = append(objs, o...)
	}
	return objs, apps, errors.Join(errs...)
}
