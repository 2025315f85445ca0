package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

func TestAlertRunbooks(t *testing.T) {
	files := map[string][]byte{"docs/runbooks/VLLMModelDown.md": []byte("# VLLMModelDown\n")}
	rule := func(annotations string) string {
		return `{apiVersion: monitoring.coreos.com/v1, kind: PrometheusRule, metadata: {name: llm-platform, namespace: llm-monitoring},
  spec: {groups: [{name: vllm, rules: [
    {record: "model_revision:vllm_gpus:count", expr: "count(up)"},
    {alert: VLLMModelDown, expr: "up == 0", annotations: ` + annotations + `}]}]}}`
	}
	cases := []struct {
		name        string
		annotations string
		want        string // substring of the one violation; "" for none
	}{
		{"runbook in the repo", `{runbook_url: "https://git.example.com/platform/llm-gitops/blob/main/docs/runbooks/VLLMModelDown.md"}`, ""},
		{"anchor and query ignored", `{runbook_url: "https://git.example.com/p/blob/main/docs/runbooks/VLLMModelDown.md?plain=1#check"}`, ""},
		{"no runbook_url", `{summary: down}`, "alert VLLMModelDown has no runbook_url annotation"},
		{"runbook elsewhere", `{runbook_url: "https://runbooks.example.com/VLLMModelDown"}`, "does not point into docs/runbooks/"},
		{"runbook not written", `{runbook_url: "https://git.example.com/p/blob/main/docs/runbooks/VLLMDown.md"}`, "docs/runbooks/VLLMDown.md does not exist at this revision"},
		{"climbing out of the folder", `{runbook_url: "https://git.example.com/p/blob/main/docs/runbooks/../../README.md"}`, "does not point into docs/runbooks/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := alertRunbooks(parseObjects(t, rule(tc.annotations)), files)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1, "violations: %+v", got)
			assert.Equal(t, "alert-runbook", got[0].Rule)
			assert.Equal(t, "PrometheusRule llm-monitoring/llm-platform", got[0].Object)
			assert.Contains(t, got[0].Message, tc.want)
		})
	}
}

func TestAlertRunbooksIgnoresOtherKinds(t *testing.T) {
	objs := parseObjects(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: n}, data: {alert: x}}
---
{apiVersion: example.com/v1, kind: PrometheusRule, metadata: {name: r, namespace: n}, spec: {groups: [{name: g, rules: [{alert: A, expr: up}]}]}}`)
	assert.Empty(t, alertRunbooks(objs, nil))
}

// TestCheckAlertRunbook removes a runbook the platform's alerts link to: check fails in every env,
// naming the PrometheusRule, the alert and the missing file; HEAD's repository passes the rule.
func TestCheckAlertRunbook(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	res, err := Run(repo, "HEAD", "HEAD")
	require.NoError(t, err)
	for _, env := range res.Envs {
		assert.Empty(t, violations(env, "alert-runbook"), env.Env)
	}
	edit("base/monitoring/prometheusrule.yaml", "docs/runbooks/VLLMModelDown.md", "docs/runbooks/VLLMModelIsDown.md")
	commit("VLLMModelDown links a runbook nobody wrote")
	res = runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		got := violations(env, "alert-runbook")
		require.Len(t, got, 1, env.Env)
		assert.Equal(t, "PrometheusRule llm-monitoring/llm-platform", got[0].Object)
		assert.Contains(t, got[0].Message, "alert VLLMModelDown has runbook_url")
		assert.Contains(t, got[0].Message, "docs/runbooks/VLLMModelIsDown.md does not exist at this revision")
	}
}

func violations(env EnvResult, rule string) []Violation { return rulesOf(env.Violations, rule) }
