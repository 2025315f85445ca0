package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// render says on stderr what it read: the work tree or a commit, and the pin Argo CD syncs a
// pinned env at, which is what diff audits.
func TestRenderSaysWhatItRead(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", release.File("prod")))
	require.NoError(t, err)
	rel, err := release.Parse("prod", data)
	require.NoError(t, err)
	require.True(t, rel.Pinned(), "prod is pinned in this repository")

	cmd := newRenderCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--env", "prod", "--repo", filepath.Join("..", "..")})
	require.NoError(t, cmd.Execute())
	assert.Contains(t, out.String(), "kind: Deployment", "the objects go to stdout")
	assert.Contains(t, errOut.String(), "rendered overlays/prod from the work tree of")
	assert.Contains(t, errOut.String(), "Argo CD syncs prod at its pin "+rel.Revision[:12])
	assert.Contains(t, errOut.String(), "--revision "+rel.Revision)
}

// schedule plan and blame read commits only; each says on stderr which repository and commit it
// read (blame: how far back, and whether it read the cluster), leaving stdout to the report.
func TestScheduleAndBlameSayWhatTheyRead(t *testing.T) {
	work, bare := scheduleRepo(t, prodScheduleText(t))
	head := scheduleGit(t, work, "rev-parse", "HEAD")
	run := func(cmd *cobra.Command, args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(args)
		require.NoError(t, cmd.Execute(), errOut.String())
		return out.String(), errOut.String()
	}

	out, errOut := run(newScheduleCommand(), "plan", "--env", "prod", "--repo", work, "--count", "1", "-o", "json")
	var plan []schedule.PlannedFiring
	require.NoError(t, json.Unmarshal([]byte(out), &plan), "stdout is the JSON alone")
	assert.Equal(t, "auditor: read clusters/prod/schedule.yaml from "+work+" at HEAD ("+head[:12]+")\n", errOut)
	_, errOut = run(newScheduleCommand(), "plan", "--env", "prod", "--repo", "file://"+bare, "--revision", "main", "--count", "1")
	assert.Equal(t, "auditor: read clusters/prod/schedule.yaml from file://"+bare+" at main ("+head[:12]+")\n", errOut)

	out, errOut = run(newBlameCommand(), "horizontalpodautoscaler/rag-api", "--env", "prod", "--repo", work, "--git-only", "-o", "json")
	var b blame.Blame
	require.NoError(t, json.Unmarshal([]byte(out), &b), "stdout is the JSON alone")
	assert.Equal(t, "auditor: blamed "+b.Object.String()+" in overlays/prod from "+work+" at HEAD ("+head[:12]+
		"), 1 first-parent commit back; the cluster was not read (--git-only)\n", errOut)

	// With the cluster, the walk starts where diff audits, unless --revision says otherwise.
	o := &blameOptions{env: "prod", src: sourceFlags{repo: "https://bot:token@git.example.com/platform.git"}}
	got := o.describe(&blame.Blame{Revision: head, Object: b.Object, Path: "overlays/prod", History: blame.History{Commits: 3}}, "read the cluster at https://10.0.0.1:6443")
	assert.Equal(t, "blamed "+b.Object.String()+" in overlays/prod from https://git.example.com/platform.git at the revision diff audits ("+
		head[:12]+"), 3 first-parent commits back; read the cluster at https://10.0.0.1:6443", got, "no credentials on stderr")
}
