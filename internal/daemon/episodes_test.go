package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// episodes reads GET /api/v1/episodes.
func (r *running) episodes(t *testing.T) EpisodesResponse {
	t.Helper()
	code, body := r.get(t, "/api/v1/episodes?env=prod")
	require.Equal(t, http.StatusOK, code, body)
	var resp EpisodesResponse
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	return resp
}

// waitFor polls until cond holds, failing with what it last saw.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not after %s; last seen:\n%s", what, timeout, last)
}

// TestEpisodesEndRevertedThenAdoptedAcrossRestarts: alice's `kubectl edit` of qdrant's replicas
// opens an episode naming her; a sync (the GitOps manager's server-side apply) ends it as
// reverted, with its duration, in the API and in chat. Her second edit is made while the daemon
// is down; the restarted daemon opens its episode, and is stopped again; a commit puts her value
// into Git and is synced; the daemon, started once more, ends the episode as adopted, naming the
// commit. Nothing is lost across the restarts.
func TestEpisodesEndRevertedThenAdoptedAcrossRestarts(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	state := t.TempDir()
	cfg := h.config(state)
	cfg.AuditEvents = AuditEventsConfig{File: cluster.AuditLog}
	d := start(t, cfg)
	rag := h.p.NS("rag")
	aliceEdits := func(from, to string) {
		t.Helper()
		out, err := editAs("alice", rag, "statefulset/qdrant", `s/^  replicas: `+from+`$/  replicas: `+to+`/`)
		require.NoError(t, err, "%s", out)
	}

	aliceEdits("1", "3")
	waitFor(t, "alice's episode opens", 30*time.Second, func() (bool, string) {
		eps := d.episodes(t)
		return len(eps.Open) == 1 && eps.Open[0].Actor != nil, jsonOf(eps)
	})
	open := d.episodes(t).Open[0]
	assert.Equal(t, "StatefulSet", open.Kind)
	assert.Equal(t, ".spec.replicas", open.Path)
	assert.Equal(t, "alice", open.Actor.User)
	assert.EqualValues(t, 3, open.Live)

	// The drift's message carries the patch that would adopt it, against the audited revision.
	waitFor(t, "chat offers the adopt patch", 30*time.Second, func() (bool, string) {
		all := strings.Join(h.receivers[0].messages(), "\n---\n")
		return strings.Contains(all, "overlays/prod/adopt-statefulset-qdrant.yaml"), all
	})
	h.p.Sync(h.p.Head) // the GitOps sync sets replicas back to 1
	waitFor(t, "the episode ends as reverted", 30*time.Second, func() (bool, string) {
		eps := d.episodes(t)
		return len(eps.Open) == 0 && len(eps.Ended) == 1, jsonOf(eps)
	})
	ended := d.episodes(t).Ended[0]
	require.NotNil(t, ended.End)
	assert.Equal(t, episode.Reverted, ended.End.How)
	assert.Equal(t, "argocd-controller", ended.End.By.Manager)
	assert.Equal(t, open.ID, ended.ID)
	assert.Positive(t, ended.Duration(time.Time{}), "a revert after the edit took some time")
	waitFor(t, "chat says how it ended", 30*time.Second, func() (bool, string) {
		all := strings.Join(h.receivers[0].messages(), "\n---\n")
		return strings.Contains(all, "reverted by argocd-controller"), all
	})
	_, metrics := d.get(t, "/metrics")
	assert.Contains(t, metrics, `auditor_drift_episode_duration_seconds_count{env="prod",how="reverted"} 1`)
	d.stop()

	// Her second edit, made while no daemon runs, is found by the next one.
	aliceEdits("1", "2")
	d = start(t, cfg)
	waitFor(t, "the restarted daemon opens her second episode", 30*time.Second, func() (bool, string) {
		eps := d.episodes(t)
		return len(eps.Open) == 1 && len(eps.Ended) == 1, jsonOf(eps)
	})
	waitFor(t, "her second episode names her", 30*time.Second, func() (bool, string) {
		eps := d.episodes(t)
		return len(eps.Open) == 1 && eps.Open[0].Actor != nil, jsonOf(eps)
	})
	second := d.episodes(t).Open[0]
	assert.EqualValues(t, 2, second.Live)
	assert.Equal(t, "alice", second.Actor.User)
	_, metrics = d.get(t, "/metrics")
	assert.Contains(t, metrics, `auditor_drift_episodes_open{env="prod",kind="StatefulSet"} 1`)
	d.stop()

	// Git adopts her value while the daemon is down; the next daemon ends the episode as adopted.
	h.p.Edit("base/rag/qdrant.yaml", "  replicas: 1\n", "  replicas: 2\n")
	commit := h.p.Commit("rag: qdrant keeps 2 replicas, as alice set")
	// A later commit that changes nothing of qdrant's is synced with it: the adopting commit is
	// the one that changed the value, not the synced head.
	require.NoError(t, h.p.Write("docs/notes.md", "typo fixed\n"))
	head := h.p.Commit("docs: typo")
	h.p.Sync(head)
	d = start(t, cfg)
	waitFor(t, "the episode ends as adopted", 30*time.Second, func() (bool, string) {
		eps := d.episodes(t)
		return len(eps.Open) == 0 && len(eps.Ended) == 2, jsonOf(eps)
	})
	adopted := d.episodes(t).Ended[0]
	assert.Equal(t, second.ID, adopted.ID)
	assert.Equal(t, "alice", adopted.Actor.User, "the person survives the restarts")
	assert.Equal(t, episode.Adopted, adopted.End.How)
	require.NotNil(t, adopted.End.Commit)
	assert.Equal(t, commit, adopted.End.Commit.SHA)
	assert.Equal(t, "rag: qdrant keeps 2 replicas, as alice set", adopted.End.Commit.Subject)
	walked := d.d.adoptRenders.Stats() // the walk that found the adopting commit
	assert.Positive(t, walked.Rendered, "the walk rendered the commits before the synced one")
	assert.Equal(t, walked.Rendered, walked.InWorker, "the walk rendered in render workers, not in the daemon")
	waitFor(t, "chat names the adopting commit", 30*time.Second, func() (bool, string) {
		all := strings.Join(h.receivers[0].messages(), "\n---\n")
		return strings.Contains(all, "adopted into Git by commit "+gitrepo.Short(commit)), all
	})
}

// editAs runs `kubectl edit` as one of the test cluster's people with a sed expression as editor.
func editAs(person, ns, obj, sedExpr string) ([]byte, error) {
	editor, err := writeEditor(sedExpr)
	if err != nil {
		return nil, err
	}
	cmd := cluster.Kubectl(context.Background(), "--context", person, "-n", ns, "edit", obj)
	cmd.Env = append(cmd.Env, "EDITOR="+editor)
	return cmd.CombinedOutput()
}

// writeEditor writes an $EDITOR script applying a sed expression to the file it is given.
func writeEditor(sedExpr string) (string, error) {
	f, err := os.CreateTemp("", "editor-*.sh")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString("#!/bin/sh\nsed -i '" + sedExpr + "' \"$1\"\n"); err != nil {
		return "", err
	}
	return f.Name(), os.Chmod(f.Name(), 0o755)
}
