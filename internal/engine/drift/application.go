package drift

import (
	"fmt"
	"strings"
)

// UnknownApplicationError says a report's group has no Application of the name asked for, or
// several that the name could be.
type UnknownApplicationError struct{ msg string }

func (e *UnknownApplicationError) Error() string { return e.msg }

// OnlyApplication narrows the report to one Application of the env's group: its objects, its
// entry. An Application the group does not have is an *UnknownApplicationError naming those it
// has; one that could not be audited is an error naming it.
func (r *Report) OnlyApplication(name string) (*Report, error) {
	app, err := r.FindApplication(name)
	if err != nil {
		return nil, err
	}
	name = app.Name
	out := *r
	out.Applications = []Application{app}
	out.Objects = []Object{}
	kept := map[Ref]bool{}
	for _, o := range r.Objects {
		if o.Application == name {
			out.Objects = append(out.Objects, o)
			kept[RefOfObject(&o)] = true
		}
	}
	out.ArgoCDOnly = nil
	for _, o := range r.ArgoCDOnly {
		if kept[RefOfObject(&Object{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})] {
			out.ArgoCDOnly = append(out.ArgoCDOnly, o)
		}
	}
	if app.Revision != "" && app.Revision != r.Revision {
		out.Revision, out.PendingSync, out.HeadRevision, out.Operation = app.Revision, false, "", nil
	}
	out.InSync = len(out.Objects) == 0
	if app.Error != "" {
		return nil, fmt.Errorf("Application %s: %s", name, app.Error)
	}
	return &out, nil
}

// FindApplication returns the Application of the report name names: its name as the report
// gives it, namespace/name (as Argo CD's CLI takes it, in Argo CD's namespace too), or its bare
// name when one Application of the group has it.
func (r *Report) FindApplication(name string) (Application, error) {
	var bare []Application
	for _, app := range r.Applications {
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
		return Application{}, &UnknownApplicationError{fmt.Sprintf("env %s has no Application %s (its Applications: %s)", r.Env, name, r.ApplicationNames())}
	}
	return Application{}, &UnknownApplicationError{fmt.Sprintf("env %s has %d Applications named %s: name one as namespace/name (its Applications: %s)",
		r.Env, len(bare), name, r.ApplicationNames())}
}

// ApplicationNames lists the names of the report's Applications, "none" when it has none.
func (r *Report) ApplicationNames() string {
	var names []string
	for _, app := range r.Applications {
		names = append(names, app.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
