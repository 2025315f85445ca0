package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// TestAppSourceSaysWhereAnApplicationIsDeclared: an Application that renders its objects with
// options of its own (a chart, kustomize options) names where Git declares it: its parent's
// source, the root's own file, the ApplicationSet that generates it. One that renders a plain
// path names nothing: its objects are adopted into that path.
func TestAppSourceSaysWhereAnApplicationIsDeclared(t *testing.T) {
	a := &Auditor{Config: Config{AppNamespace: "argocd"}}
	root := &unit{name: "root-prod", target: render.AppTarget("apps/prod"), role: roleRoot, selfFile: "clusters/prod/root.yaml"}
	chart := &unit{name: "api", target: render.AppTarget("charts/api"), parent: "root-prod", renderedAs: renderedChart}
	plain := &unit{name: "gate", target: render.AppTarget("apps/gate"), parent: "root-prod"}
	generated := &unit{name: "api-dev", target: render.AppTarget("charts/api"), parent: "root-prod", renderedAs: renderedChart, via: "ApplicationSet apis"}
	opts := &unit{name: "worker", target: render.AppTarget("extras"), parent: "api", renderedAs: renderedWithOptions}
	selfChart := &unit{name: "root-prod", target: render.AppTarget("charts/apps"), role: roleRoot, selfFile: "clusters/prod/root.yaml", renderedAs: renderedChart}
	units := []*unit{root, chart, plain, generated, opts}
	assert.Equal(t, "apps/prod", chart.appSource(a, units))
	assert.Empty(t, plain.appSource(a, units))
	assert.Empty(t, root.appSource(a, units))
	assert.Equal(t, drift.GeneratedSource+"apis", generated.appSource(a, units))
	assert.Equal(t, "Helm chart charts/api", opts.appSource(a, units), "its parent renders a chart: adopt says so")
	assert.Equal(t, "clusters/prod/root.yaml", selfChart.appSource(a, []*unit{selfChart}))
}
