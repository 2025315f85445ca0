package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/audit"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/layout"
)

// onlyApplication narrows a report to one Application of the env's group: its objects, its
// entry. An Application the group does not have is a usage error naming those it has.
func onlyApplication(rep *drift.Report, name string) (*drift.Report, error) {
	app, err := findApplication(rep, name)
	if err != nil {
		return nil, err
	}
	name = app.Name
	out := *rep
	out.Applications = []drift.Application{app}
	out.Objects = []drift.Object{}
	kept := map[drift.Ref]bool{}
	for _, o := range rep.Objects {
		if o.Application == name {
			out.Objects = append(out.Objects, o)
			kept[drift.RefOfObject(&o)] = true
		}
	}
	out.ArgoCDOnly = nil
	for _, o := range rep.ArgoCDOnly {
		if kept[drift.RefOfObject(&drift.Object{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})] {
			out.ArgoCDOnly = append(out.ArgoCDOnly, o)
		}
	}
	if app.Revision != "" && app.Revision != rep.Revision {
		out.Revision, out.PendingSync, out.HeadRevision, out.Operation = app.Revision, false, "", nil
	}
	out.InSync = len(out.Objects) == 0
	if app.Error != "" {
		return nil, failed(fmt.Errorf("Application %s: %s", name, app.Error))
	}
	return &out, nil
}

// findApplication returns the Application of the report name names: its name as the report
// gives it, namespace/name (as Argo CD's CLI takes it, in Argo CD's namespace too), or its bare
// name when one Application of the group has it.
func findApplication(rep *drift.Report, name string) (drift.Application, error) {
	var bare []drift.Application
	for _, app := range rep.Applications {
		short := app.Name
		if _, n, ok := strings.Cut(app.Name, "/"); ok {
			short = n
		}
		if app.Name == name || app.Namespace != "" && app.Namespace+"/"+short == name {
			return app, nil
		}
		if short == name {
			bare = append(bare, app)
		}
	}
	switch len(bare) {
	case 1:
		return bare[0], nil
	case 0:
		return drift.Application{}, usageErr("env %s has no Application %s (its Applications: %s)", rep.Env, name, applicationNames(rep))
	}
	return drift.Application{}, usageErr("env %s has %d Applications named %s: name one as namespace/name (its Applications: %s)", rep.Env, len(bare), name, applicationNames(rep))
}

// applicationNames lists the Applications of an env's group, for errors.
func applicationNames(rep *drift.Report) string {
	var names []string
	for _, app := range rep.Applications {
		names = append(names, app.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// runAll audits every env of the repository, one report each; with --app, only the env whose
// group has that Application (none: a usage error naming each env's Applications). An env that
// cannot be audited is named on stderr and the others are audited.
func (o *diffOptions) runAll(ctx context.Context, w io.Writer, a *audit.Auditor) error {
	if len(a.Envs) == 0 {
		return failed(fmt.Errorf("the repository has no envs: list them in %s (each by its root Application), or keep one overlay per env under overlays/", layout.LayoutFile))
	}
	reps := []*drift.Report{}
	var errs []error
	appFound := false  // with --app: an env's group has it
	var known []string // with --app: the Applications of the envs without it
	for _, env := range a.Envs {
		rep, err := a.Run(ctx, audit.Request{Env: env, Revision: o.src.revision})
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", env, err)
			errs = append(errs, fmt.Errorf("%s: %w", env, err))
			continue
		}
		if o.app != "" {
			if !hasApplication(rep, o.app) {
				known = append(known, env+": "+applicationNames(rep))
				continue // not this env's
			}
			appFound = true
			if rep, err = onlyApplication(rep, o.app); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
				continue
			}
		}
		reps = append(reps, rep)
	}
	if o.app != "" && !appFound && len(known) > 0 {
		if len(errs) > 0 { // the envs not audited may have it
			return failed(fmt.Errorf("no env audited has an Application %s (%s); not audited: %w",
				o.app, strings.Join(known, "; "), errors.Join(errs...)))
		}
		return usageErr("no env has an Application %s (%s)", o.app, strings.Join(known, "; "))
	}
	if o.output != "text" {
		if err := writeReport(w, o.output, reps, nil); err != nil {
			return failed(err)
		}
	} else {
		for i, rep := range reps {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeText(w, rep, time.Now())
		}
	}
	if len(errs) > 0 {
		return failed(errors.Join(errs...))
	}
	for _, rep := range reps {
		if !rep.InSync {
			return found("drift")
		}
	}
	return nil
}

// hasApplication says whether the env's group has the Application.
func hasApplication(rep *drift.Report, name string) bool {
	_, err := findApplication(rep, name)
	return err == nil
}
