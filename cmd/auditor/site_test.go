package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/site"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// TestSiteSetAndShow: `site set` on a copy of the repository writes the values and lists the
// example names left; `site show -o json` then reads the same; bad input writes nothing, exit 2.
func TestSiteSetAndShow(t *testing.T) {
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, gittest.ReadTree(t, "../..", "base", "components", "overlays", "apps", "clusters"))

	out, err := runCmd(t, newRootCommand(), "site", "show", "--env", "staging", "--repo", dir, "-o", "json")
	require.NoError(t, err)
	var before siteReport
	require.NoError(t, json.Unmarshal([]byte(out), &before), out)
	assert.True(t, before.Template)
	assert.Contains(t, foundKeys(before.Examples), "domain")

	out, err = runCmd(t, newRootCommand(), "site", "set", "--env", "staging", "--repo", dir, "-o", "json",
		"domain=llm.staging.acme.io", "gitWebURL=https://git.acme.io/ml/platform/-/blob/main")
	require.NoError(t, err)
	var set siteReport
	require.NoError(t, json.Unmarshal([]byte(out), &set), out)
	assert.False(t, set.Template)
	assert.Contains(t, set.Changes, site.Change{File: "overlays/staging/site/site.yaml", Path: "data.domain", Old: "llm.staging.example.com", New: "llm.staging.acme.io"})
	keys := foundKeys(set.Examples)
	assert.NotContains(t, keys, "domain")
	assert.NotContains(t, keys, "gitWebURL")
	assert.Contains(t, keys, "gitURL", "the values not set are still examples")
	assert.Contains(t, keys, "registry")

	out, err = runCmd(t, newRootCommand(), "site", "show", "--env", "staging", "--repo", dir, "-o", "json")
	require.NoError(t, err)
	var after siteReport
	require.NoError(t, json.Unmarshal([]byte(out), &after), out)
	assert.Equal(t, set.Examples, after.Examples)
	assert.Equal(t, "llm.staging.acme.io", after.Values["domain"])

	for _, args := range [][]string{
		{"domain=https://llm.acme.io"}, {"domian=llm.acme.io"}, {"domain"}, {},
	} {
		code, msg := exitAndError(t, append([]string{"site", "set", "--env", "staging", "--repo", dir}, args...)...)
		assert.Equal(t, codeError, code, "%v: %s", args, msg)
	}
	assert.Equal(t, codeError, exitOf(t, "site", "set", "--env", "staging", "--repo", "https://git.acme.io/x.git", "domain=a.io"))
	again, err := runCmd(t, newRootCommand(), "site", "show", "--env", "staging", "--repo", dir, "-o", "json")
	require.NoError(t, err)
	assert.JSONEq(t, out, again, "bad input wrote nothing")
}

func foundKeys(fs []site.Found) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Key)
	}
	return out
}
