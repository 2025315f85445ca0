package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/layout"
)

func TestUseLayoutFromAsksAtEachCall(t *testing.T) {
	first := &layout.Layout{File: layout.LayoutFile, Envs: []layout.Env{{Name: "prod", Namespace: "argocd", Root: "acme-root", RootManifest: "clusters/prod/root.yaml"}}}
	second := &layout.Layout{File: layout.LayoutFile, Envs: []layout.Env{
		{Name: "prod", Namespace: "argocd", Projects: []string{"web"}},
		{Name: "staging", Namespace: "argocd", Root: "acme-staging"},
	}}
	current := first
	cfg := Config{Envs: []string{"prod", "dev"}}
	UseLayoutFrom(&cfg, func() *layout.Layout { return current })
	a := New(cfg)
	for _, tc := range []struct {
		name           string
		layout         *layout.Layout
		root, app, man string
		selects        bool
		envs           []string
	}{
		{name: "the first layout", layout: first, root: "acme-root", man: "clusters/prod/root.yaml", envs: []string{"prod", "dev"}},
		{name: "the next one", layout: second, root: "", selects: true, envs: []string{"prod", "dev", "staging"}},
		{name: "none: the defaults", layout: nil, root: "root-prod", app: "llm-prod", man: "clusters/prod/root.yaml", envs: []string{"prod", "dev"}},
	} {
		current = tc.layout
		assert.Equal(t, tc.root, a.RootName("prod"), tc.name)
		assert.Equal(t, tc.app, a.AppName("prod"), tc.name)
		assert.Equal(t, tc.man, a.RootManifest("prod"), tc.name)
		assert.Equal(t, tc.selects, a.Select("prod") != nil, tc.name)
		assert.Equal(t, "root-dev", a.RootName("dev"), "%s: an env the layout does not list", tc.name)
		assert.Equal(t, tc.envs, a.envs(), tc.name)
	}
}

func TestLayoutNamespace(t *testing.T) {
	l := &layout.Layout{File: layout.LayoutFile, Envs: []layout.Env{
		{Name: "prod", Namespace: "acme-cd"}, {Name: "dev", Namespace: "acme-cd"}, {Name: "staging", Namespace: "argocd"},
	}}
	for _, tc := range []struct {
		name      string
		envs      []string
		want, err string
	}{
		{name: "one env", envs: []string{"staging"}, want: "argocd"},
		{name: "two in one namespace", envs: []string{"prod", "dev", "qa"}, want: "acme-cd"},
		{name: "none listed", envs: []string{"qa"}, want: ""},
		{name: "every env: two namespaces", envs: nil,
			err: ".auditor.yaml puts the envs' root Applications in different namespaces (dev, prod in acme-cd; staging in argocd)"},
	} {
		got, err := LayoutNamespace(l, tc.envs)
		if tc.err != "" {
			require.Error(t, err, tc.name)
			assert.Contains(t, err.Error(), tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}
