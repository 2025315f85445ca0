package audit

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llm-gitops/platform/internal/layout"
)

// UseLayout makes cfg find each env of l as the layout says: its root Application, the file of
// the root's manifest, its own Application (the convention's only) and the AppProjects and label
// selector that pick more Applications. An env l does not list keeps cfg's functions (or New's
// defaults). Envs becomes l's envs.
func UseLayout(cfg *Config, l *layout.Layout) {
	byName := map[string]layout.Env{}
	for _, e := range l.Envs {
		byName[e.Name] = e
	}
	or := func(f func(string) string, def func(string) string) func(string) string {
		if f == nil {
			return def
		}
		return f
	}
	rootName, appName, rootManifest, sel := or(cfg.RootName, RootName), or(cfg.AppName, defaultAppName), or(cfg.RootManifest, RootManifest), cfg.Select
	cfg.RootName = func(env string) string {
		if e, ok := byName[env]; ok {
			return e.Root
		}
		return rootName(env)
	}
	cfg.AppName = func(env string) string {
		if e, ok := byName[env]; ok {
			return e.Application
		}
		return appName(env)
	}
	cfg.RootManifest = func(env string) string {
		if e, ok := byName[env]; ok {
			return e.RootManifest
		}
		return rootManifest(env)
	}
	cfg.Select = func(env string) *AppSelection {
		if sel != nil {
			if s := sel(env); s != nil {
				return s
			}
		}
		e, ok := byName[env]
		if !ok || len(e.Projects) == 0 && e.Selector == "" {
			return nil
		}
		s := &AppSelection{Namespaces: []string{e.Namespace}, Projects: e.Projects}
		s.Selector, _ = labels.Parse(e.Selector) // checked by layout.Parse
		return s
	}
	cfg.Envs = l.Names()
}

// defaultAppName is an env's own Application by default: llm-<env>.
func defaultAppName(env string) string { return "llm-" + env }
