package check

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/site"
)

// TestCheckSiteValues: HEAD's template passes rule site-values with one warning per env. A site
// that sets every value but the domain (prod) fails prod naming the Gateway and its Certificate
// and the key to set; staging, still the template's, only warns. A malformed value fails.
func TestCheckSiteValues(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	res := runCheck(t, dir)
	for _, env := range res.Envs {
		assert.Empty(t, violations(env, "site-values"), env.Env)
		w := rulesOf(env.Warnings, "site-values")
		require.Len(t, w, 1, env.Env)
		assert.Equal(t, "overlays/"+env.Env+"/site/site.yaml", w[0].Object)
		assert.Contains(t, w[0].Message, "auditor site set --env "+env.Env)
	}

	values := map[string]string{
		"gitURL": "https://git.acme.io/ml/platform.git", "gitWebURL": "https://git.acme.io/ml/platform/-/blob/main",
		"issuer": "acme-ca", "secretStore": "vault", "argocdURL": "https://cd.acme.io", "registry": "ghcr.io/acme/ml",
		"nodeRole": "KarpenterNodeRole-acme", "clusterName": "acme-prod",
	}
	_, err := site.Set(dir, "prod", values)
	require.NoError(t, err)
	commit("prod: the site's values, all but the domain")
	res = runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		got := violations(env, "site-values")
		if env.Env != "prod" {
			assert.Empty(t, got, env.Env)
			assert.Len(t, rulesOf(env.Warnings, "site-values"), 1, env.Env)
			continue
		}
		assert.Empty(t, rulesOf(env.Warnings, "site-values"), "no longer the template's")
		objects := map[string]string{}
		for _, v := range got {
			objects[v.Object] = v.Message
		}
		assert.Equal(t, []string{"Certificate llm-inference/llm-gateway-tls", "Gateway llm-inference/llm-gateway"}, slices.Sorted(maps.Keys(objects)))
		for _, msg := range objects {
			assert.Contains(t, msg, "llm.example.com from site value domain: set it with `auditor site set --env prod domain=...`")
		}
	}

	edit("overlays/prod/site/site.yaml", "domain: llm.example.com", "domain: https://llm.acme.io")
	commit("prod: a URL where a DNS name goes")
	res = runCheck(t, dir)
	got := violations(res.Envs[0], "site-values")
	require.Len(t, got, 1, "%+v", got)
	assert.Equal(t, "overlays/prod/site/site.yaml", got[0].Object)
	assert.True(t, strings.HasPrefix(got[0].Message, `domain: "https://llm.acme.io" is not a DNS name`), got[0].Message)
}
