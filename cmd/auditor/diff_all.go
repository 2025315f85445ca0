package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/layout"
)

// onlyApplication narrows a report to one Application of the env's group (drift's
// OnlyApplication): an Application the group does not have is a usage error.
func onlyApplication(rep *drift.Report, name string) (*drift.Report, error) {
	out, err := rep.OnlyApplication(name)
	var unknown *drift.UnknownApplicationError
	switch {
	case errors.As(err, &unknown):
		return nil, usageErr("%v", err)
	case err != nil:
		return nil, failed(err)
	}
	return out, nil
}

// applicationNames lists the report's Applications.
func applicationNames(rep *drift.Report) string { return rep.ApplicationNames() }

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
		o.daemon.takePeople(ctx, rep, os.Stderr)
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
	_, err := rep.FindApplication(name)
	return err == nil
}
