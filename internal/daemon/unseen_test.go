package daemon

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// A daemon restarted while an Application's cluster is unreachable has no audit of it to carry:
// the drift its tracker (read back from the state file) holds for that Application stands, so
// nothing is resolved, and the other Applications' drift that did go is.
func TestUnseenDriftOfAnApplicationNotAuditedStands(t *testing.T) {
	edit := drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "edge", Name: "settings", Cluster: "edge-1",
		Application: "edge", Status: drift.Modified, Fields: []drift.Field{{Path: ".data.replicas", Change: drift.Changed, Desired: "2", Live: "5"}}}
	hub := drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm", Name: "flags", Application: "llm-prod",
		Status: drift.Modified, Fields: []drift.Field{{Path: ".data.k", Change: drift.Changed, Desired: "a", Live: "b"}}}
	before := notify.NewTracker()
	_, _, err := before.Observe(&drift.Report{Env: "prod", Revision: "r1", Objects: []drift.Object{edit, hub}})
	require.NoError(t, err)
	state, err := json.Marshal(before)
	require.NoError(t, err)
	d := &Daemon{deliveryParts: &deliveryParts{tracker: notify.NewTracker()}} // the restarted daemon
	require.NoError(t, json.Unmarshal(state, d.tracker))

	outage := &drift.Report{Env: "prod", Revision: "r1", Applications: []drift.Application{
		{Name: "llm-prod"}, {Name: "edge", Cluster: "edge-1", Error: "Application edge: cluster edge-1 unreachable"}},
		Objects: []drift.Object{}, InSync: true}
	_, resolved, err := d.tracker.Observe(d.withUnseen(outage))
	require.NoError(t, err)
	var gone []string
	for _, it := range resolved {
		gone = append(gone, it.Object.Name)
	}
	assert.Equal(t, []string{"flags"}, gone, "only the hub's drift, which its audit no longer finds, ended")
	assert.Len(t, d.tracker.Current("prod"), 1)
	assert.Equal(t, outage.Objects, []drift.Object{}, "the report itself is left as it was")
}
