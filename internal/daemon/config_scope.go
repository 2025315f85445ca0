package daemon

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// ExtraConfig is the scope of Extra objects: drift.DefaultExtraKinds and every kind the env
// renders, less DefaultExtraExcept, in the env's namespaces and cluster-wide for cluster-scoped
// kinds; objects drift.DefaultExtraIgnore's label selectors select are never Extra.
type ExtraConfig struct {
	// Kinds are more kinds to search, as "group/version/Kind" ("v1/Secret" for the core group).
	Kinds []string `json:"kinds,omitempty"`
	// NotRendered leaves out the kinds the env renders that are not in the kind list.
	NotRendered bool `json:"notRendered,omitempty"`
	// Except are kinds never searched, as "group/Kind" ("Namespace" for the core group).
	Except []string `json:"except,omitempty"`
	// Ignore are more label selectors (kubectl's syntax) of objects never Extra.
	Ignore []string `json:"ignore,omitempty"`
	// Own are the auditor's own objects, by name, as "group/Kind:namespace/name" (the chart's
	// RoleBindings in the namespaces it reads): never Extra, wherever they are. A name, not a
	// label: a label is a claim anyone can make.
	Own []string `json:"own,omitempty"`
}

// apply puts the scope into opts.
func (e ExtraConfig) apply(opts *drift.Options) {
	for _, k := range e.Kinds {
		opts.ExtraKinds = append(slices.Clone(opts.ExtraKinds), parseGVK(k))
	}
	opts.ExtraRendered = !e.NotRendered
	for _, k := range e.Except {
		opts.ExtraExcept = append(slices.Clone(opts.ExtraExcept), parseGroupKind(k))
	}
	opts.ExtraIgnore = append(slices.Clone(opts.ExtraIgnore), e.Ignore...)
	if len(e.Own) > 0 {
		opts.ExtraOwn = map[drift.Ref]bool{}
		for _, o := range e.Own {
			if r, ok := parseRef(o); ok {
				opts.ExtraOwn[r] = true
			}
		}
	}
}

// parseRef reads "group/Kind:namespace/name" ("Kind:namespace/name" for the core group,
// ":name" for a cluster-scoped object).
func parseRef(s string) (drift.Ref, bool) {
	kind, obj, ok := strings.Cut(s, ":")
	if !ok || kind == "" {
		return drift.Ref{}, false
	}
	gk := parseGroupKind(kind)
	ns, name, found := strings.Cut(obj, "/")
	if !found {
		ns, name = "", obj
	}
	if name == "" {
		return drift.Ref{}, false
	}
	return drift.Ref{Group: gk.Group, Kind: gk.Kind, Namespace: ns, Name: name}, true
}

// parseGroupKind reads "group/Kind", or "Kind" for the core group.
func parseGroupKind(s string) schema.GroupKind {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return schema.GroupKind{Group: s[:i], Kind: s[i+1:]}
	}
	return schema.GroupKind{Kind: s}
}

// parseGVK reads "group/version/Kind" or "version/Kind".
func parseGVK(s string) schema.GroupVersionKind {
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 2:
		return schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}
	case 3:
		return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}
	}
	return schema.GroupVersionKind{}
}

// AppSelectionConfig picks an env's Applications from the cluster: those in Namespaces (default
// appNamespace; each one appNamespace or one of appNamespaces, where the daemon watches
// Applications) of one of Projects (any when empty) whose labels match Selector (kubectl's syntax; every one when
// empty). At least Projects or Selector is required. An Application another Application synced
// (it carries a tracking id) is never taken by a selection.
type AppSelectionConfig struct {
	Namespaces []string `json:"namespaces,omitempty"`
	Projects   []string `json:"projects,omitempty"`
	Selector   string   `json:"selector,omitempty"`
}

// selection is c as the auditor takes it (its selector parsed by validate).
func (c AppSelectionConfig) selection(appNamespace string) *audit.AppSelection {
	sel, _ := labels.Parse(c.Selector)
	ns := c.Namespaces
	if len(ns) == 0 {
		ns = []string{appNamespace}
	}
	return &audit.AppSelection{Namespaces: ns, Projects: c.Projects, Selector: sel}
}

// appName is env's own Application: none for an env of Roots, else <appNamePrefix><env>.
func (c *Config) appName(env string) string {
	if _, ok := c.Roots[env]; ok {
		return ""
	}
	if c.AppNamePrefix == nil {
		return "llm-" + env
	}
	return *c.AppNamePrefix + env
}

// rootName is env's root Application: Roots', else <rootNamePrefix><env>.
func (c *Config) rootName(env string) string {
	if r, ok := c.Roots[env]; ok {
		return r
	}
	if c.RootNamePrefix == nil {
		return "root-" + env
	}
	return *c.RootNamePrefix + env
}
