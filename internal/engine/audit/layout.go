package audit

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/llm-gitops/platform/internal/engine/layout"
)

// UseLayout makes cfg find each env of l as the layout says (UseLayoutFrom with l alone). Envs
// becomes l's envs.
func UseLayout(cfg *Config, l *layout.Layout) {
	UseLayoutFrom(cfg, func() *layout.Layout { return l })
	cfg.Envs = l.Names()
}

// UseLayoutFrom makes cfg find each env as the layout current returns says: its root
// Application, the file of the root's manifest, its own Application (the convention's only) and
// the AppProjects and label selector that pick more Applications. Every call of RootName,
// AppName, RootManifest and Select asks current, so a layout that moves (a daemon's, read at the
// branch head) is followed. An env the layout does not list, and every env while current returns
// nil, keeps cfg's functions (or New's defaults); a selection of cfg's Select wins over the
// layout's. The layout's envs join Envs.
func UseLayoutFrom(cfg *Config, current func() *layout.Layout) {
	env := func(name string) (layout.Env, bool) {
		if l := current(); l != nil {
			return l.Env(name)
		}
		return layout.Env{}, false
	}
	or := func(f func(string) string, def func(string) string) func(string) string {
		if f == nil {
			return def
		}
		return f
	}
	rootName, appName, rootManifest, sel := or(cfg.RootName, RootName), or(cfg.AppName, defaultAppName), or(cfg.RootManifest, RootManifest), cfg.Select
	cfg.RootName = func(name string) string {
		if e, ok := env(name); ok {
			return e.Root
		}
		return rootName(name)
	}
	cfg.AppName = func(name string) string {
		if e, ok := env(name); ok {
			return e.Application
		}
		return appName(name)
	}
	cfg.RootManifest = func(name string) string {
		if e, ok := env(name); ok {
			return e.RootManifest
		}
		return rootManifest(name)
	}
	cfg.Select = func(name string) *AppSelection {
		if sel != nil {
			if s := sel(name); s != nil {
				return s
			}
		}
		e, ok := env(name)
		if !ok || len(e.Projects) == 0 && e.Selector == "" {
			return nil
		}
		s := &AppSelection{Namespaces: []string{e.Namespace}, Projects: e.Projects}
		s.Selector, _ = labels.Parse(e.Selector) // checked by layout.Parse
		return s
	}
	cfg.layoutEnvs = func() []string {
		if l := current(); l != nil {
			return l.Names()
		}
		return nil
	}
}

// LayoutNamespace is the namespace the envs of l that envs names (every env of l when envs is
// nil) hold their root and own Applications in: "" when l lists none of them. An Auditor reads
// one namespace (AppNamespace): envs in different ones are an error naming them.
func LayoutNamespace(l *layout.Layout, envs []string) (string, error) {
	byNS := map[string][]string{}
	for _, e := range l.Envs {
		if envs == nil || slices.Contains(envs, e.Name) {
			byNS[e.Namespace] = append(byNS[e.Namespace], e.Name)
		}
	}
	if len(byNS) <= 1 {
		for ns := range byNS {
			return ns, nil
		}
		return "", nil
	}
	var where []string
	for ns, names := range byNS {
		slices.Sort(names)
		where = append(where, strings.Join(names, ", ")+" in "+ns)
	}
	slices.Sort(where)
	return "", fmt.Errorf("%s puts the envs' root Applications in different namespaces (%s), and one audit reads Applications in one namespace",
		l.Describe(), strings.Join(where, "; "))
}

// envs are every env the cluster holds: Envs and the layout's (UseLayoutFrom).
func (a *Auditor) envs() []string {
	if a.layoutEnvs == nil {
		return a.Envs
	}
	out := slices.Clone(a.Envs)
	for _, e := range a.layoutEnvs() {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// defaultAppName is an env's own Application by default: llm-<env>.
func defaultAppName(env string) string { return "llm-" + env }
