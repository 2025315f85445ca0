package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

func TestDisablesSaysWhatAHandEditOfAnApplicationTurnsOff(t *testing.T) {
	app := func(fields ...drift.Field) *drift.Object {
		return &drift.Object{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Name: "llm-prod", Status: drift.Modified, Fields: fields}
	}
	for _, tc := range []struct {
		name string
		obj  *drift.Object
		want string
	}{
		{"selfHeal false", app(drift.Field{Path: ".spec.syncPolicy.automated.selfHeal", Desired: true, Live: false}),
			"selfHeal turned off on llm-prod: later hand edits to its objects will stand"},
		{"automated removed", app(drift.Field{Path: ".spec.syncPolicy.automated", Desired: map[string]any{"prune": true}, Live: nil}),
			"automated sync turned off on llm-prod: Git's commits are no longer applied"},
		{"an exemption added", app(drift.Field{Path: ".spec.ignoreDifferences", Desired: []any{}, Live: []any{map[string]any{"kind": "Deployment"}}}),
			"ignoreDifferences on llm-prod that Git does not declare: Argo CD no longer sees what it names; the auditor excuses nothing by it"},
		{"another revision", app(drift.Field{Path: ".spec.source.targetRevision", Desired: "main", Live: "hotfix"}),
			"llm-prod syncs a source Git does not declare"},
		{"prune removed", app(drift.Field{Path: ".spec.syncPolicy.automated.prune", Desired: true, Live: nil}),
			"prune turned off on llm-prod: objects removed from Git stay in the cluster"},
		{"skip-reconcile", app(drift.Field{Path: ".metadata.annotations.argocd.argoproj.io/skip-reconcile", Live: "true"}),
			"reconciliation skipped on llm-prod: Argo CD no longer compares or syncs it"},
		{"selfHeal turned on is not a loss", app(drift.Field{Path: ".spec.syncPolicy.automated.selfHeal", Desired: false, Live: true}), ""},
		{"a label", app(drift.Field{Path: ".metadata.labels.team", Live: "x"}), ""},
		{"not an Application", &drift.Object{APIVersion: "v1", Kind: "ConfigMap", Name: "x", Status: drift.Modified,
			Fields: []drift.Field{{Path: ".spec.ignoreDifferences", Live: 1}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, disables(tc.obj))
		})
	}
}
