package episode

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

var t0 = time.Date(2026, 11, 30, 9, 14, 0, 0, time.UTC)

// deployment is a live Deployment whose spec.replicas is value, owned by the writers given
// (manager → time), each owning spec.replicas.
func deployment(replicas int64, owners map[string]time.Time) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "vllm", "namespace": "llm", "uid": "uid-1"},
		"spec":     map[string]any{"replicas": replicas},
	}}
	var mf []metav1.ManagedFieldsEntry
	for m, at := range owners {
		op := metav1.ManagedFieldsOperationUpdate
		if m == "argocd-controller" {
			op = metav1.ManagedFieldsOperationApply
		}
		mf = append(mf, metav1.ManagedFieldsEntry{Manager: m, Operation: op, APIVersion: "apps/v1", Time: &metav1.Time{Time: at},
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}})
	}
	u.SetManagedFields(mf)
	return u
}

var replicasPath = drift.FieldPath(fieldpath.MakePathOrDie("spec", "replicas"))

// replicasDrift is a report of env prod at revision with spec.replicas drifted to live.
func replicasDrift(revision string, live int64, manager string, at time.Time, actor *drift.Actor) *drift.Report {
	return &drift.Report{Env: "prod", Revision: revision, Objects: []drift.Object{{
		APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm", Name: "vllm", Status: drift.Modified,
		Fields: []drift.Field{{Path: ".spec.replicas", FieldPath: replicasPath, Desired: int64(1), Live: live, Change: drift.Changed,
			Writer: drift.Writer{Manager: manager, Operation: "Update", Time: at.Format(time.RFC3339)}, Actor: actor}},
	}}}
}

func withUID(u *unstructured.Unstructured, uid string) *unstructured.Unstructured {
	u.SetUID(types.UID(uid))
	return u
}

func liveIs(u *unstructured.Unstructured) LiveGetter {
	return func(_, _, _, _, _ string) (*unstructured.Unstructured, bool) { return u, u != nil }
}

func TestEpisodeEnds(t *testing.T) {
	alice := &drift.Actor{User: "alice", Verb: "patch", Time: t0.Add(500 * time.Millisecond).Format(time.RFC3339Nano)}
	tests := []struct {
		name     string
		revision string // of the report without the drift
		live     *unstructured.Unstructured
		want     End
		took     time.Duration
	}{
		{name: "synced back by Argo CD", revision: "aaa", live: deployment(1, map[string]time.Time{"argocd-controller": t0.Add(4 * time.Minute)}),
			want: End{How: Reverted, By: &drift.Writer{Manager: "argocd-controller", Operation: "Apply", Time: t0.Add(4 * time.Minute).Format(time.RFC3339)}, Revision: "aaa"},
			took: 4*time.Minute - 500*time.Millisecond},
		{name: "a commit put the live value into Git", revision: "bbb", live: deployment(3, map[string]time.Time{"kubectl-edit": t0}),
			want: End{How: Adopted, Revision: "bbb", Commit: &Commit{SHA: "bbb", Subject: "prod: keep 3 replicas"}}, took: 10*time.Minute - 500*time.Millisecond},
		{name: "a new revision synced Git's value back", revision: "bbb", live: deployment(1, map[string]time.Time{"argocd-controller": t0.Add(time.Minute)}),
			want: End{How: Reverted, By: &drift.Writer{Manager: "argocd-controller", Operation: "Apply", Time: t0.Add(time.Minute).Format(time.RFC3339)}, Revision: "bbb"},
			took: time.Minute - 500*time.Millisecond},
		{name: "object deleted", revision: "aaa", live: nil, want: End{How: Deleted, Revision: "aaa"}, took: 10*time.Minute - 500*time.Millisecond},
		{name: "object deleted and made again", revision: "aaa", live: withUID(deployment(1, map[string]time.Time{"argocd-controller": t0.Add(time.Minute)}), "uid-2"),
			want: End{How: Deleted, Revision: "aaa"}, took: 10*time.Minute - 500*time.Millisecond},
		{name: "left the report with the value and Git unmoved (an ignore rule)", revision: "aaa", live: deployment(3, map[string]time.Time{"kubectl-edit": t0}),
			want: End{How: Dropped, Revision: "aaa"}, took: 10*time.Minute - 500*time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook(0, 0)
			before := liveIs(withUID(deployment(3, map[string]time.Time{"kubectl-edit": t0}), "uid-1"))
			opened, ended := b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, alice), Live: before, Now: t0.Add(2 * time.Second)})
			require.Len(t, opened, 1)
			assert.Equal(t, "uid-1", opened[0].UID)
			require.Empty(t, ended)
			assert.Equal(t, "alice", opened[0].Actor.User)
			assert.Equal(t, t0.Add(500*time.Millisecond), opened[0].Start, "starts at the audit event")

			now := t0.Add(10 * time.Minute)
			_, ended = b.Observe(Observation{Report: &drift.Report{Env: "prod", Revision: tc.revision}, Live: liveIs(tc.live), Now: now,
				Adopter: func(_ Episode, rev string) (*Commit, bool) {
					return &Commit{SHA: rev, Subject: "prod: keep 3 replicas"}, true
				}})
			require.Len(t, ended, 1)
			got := ended[0]
			require.NotNil(t, got.End)
			want := tc.want
			want.At = got.Start.Add(tc.took)
			assert.Equal(t, want, *got.End)
			assert.Equal(t, tc.took, got.Duration(now))
			assert.Empty(t, b.Open("prod"))
			last, ok := b.LastEnded(Identity("prod", "", "apps/v1", "Deployment", "llm", "vllm", ".spec.replicas"))
			require.True(t, ok)
			assert.Equal(t, got.ID, last.ID)
		})
	}
}

func TestOverwriteStartsANewEpisode(t *testing.T) {
	b := NewBook(0, 0)
	b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, &drift.Actor{User: "alice", Time: t0.Format(time.RFC3339)}), Now: t0})
	// the same drift seen again: nothing opens or ends
	opened, ended := b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0.Add(time.Second)})
	assert.Empty(t, opened)
	assert.Empty(t, ended)

	bob := &drift.Actor{User: "bob", Time: t0.Add(time.Minute).Format(time.RFC3339)}
	opened, ended = b.Observe(Observation{Report: replicasDrift("aaa", 5, "kubectl-scale", t0.Add(time.Minute), bob), Now: t0.Add(time.Minute + time.Second)})
	require.Len(t, opened, 1)
	require.Len(t, ended, 1)
	assert.Equal(t, Overwritten, ended[0].End.How)
	assert.Equal(t, "bob", ended[0].End.Actor.User)
	assert.Equal(t, opened[0].ID, ended[0].End.Next)
	assert.Equal(t, time.Minute, ended[0].Duration(time.Time{}))
	assert.Equal(t, int64(5), opened[0].Live)

	open := b.Open("prod")
	require.Len(t, open, 1)
	assert.Equal(t, "bob", open[0].Actor.User)
}

func TestEpisodesSurviveARestart(t *testing.T) {
	b := NewBook(0, 0)
	b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0})
	data, err := json.Marshal(b)
	require.NoError(t, err)

	restarted := NewBook(0, 0)
	require.NoError(t, json.Unmarshal(data, restarted))
	// the drift still stands after the restart (the value read back is a float64): no new episode
	opened, ended := restarted.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0.Add(time.Minute)})
	assert.Empty(t, opened)
	assert.Empty(t, ended)
	// and it ends as it would have without the restart
	_, ended = restarted.Observe(Observation{Report: &drift.Report{Env: "prod", Revision: "bbb"},
		Live: liveIs(deployment(3, map[string]time.Time{"kubectl-edit": t0})), Now: t0.Add(2 * time.Minute)})
	require.Len(t, ended, 1)
	assert.Equal(t, Adopted, ended[0].End.How)
	assert.Equal(t, "bbb", ended[0].End.Commit.SHA)
	assert.Equal(t, 2*time.Minute, ended[0].Duration(time.Time{}))
}

func TestRetention(t *testing.T) {
	b := NewBook(2, time.Hour)
	for i := range 4 {
		at := t0.Add(time.Duration(i) * time.Minute)
		b.Observe(Observation{Report: replicasDrift("aaa", int64(3+i), "kubectl-edit", at, nil), Now: at})
	}
	ended := b.Ended("", 0)
	require.Len(t, ended, 2, "keeps the 2 most recent")
	assert.Equal(t, int64(5), ended[0].Live, "newest first")
	assert.Equal(t, int64(4), ended[1].Live)

	b.Observe(Observation{Report: &drift.Report{Env: "prod", Revision: "aaa"}, Now: t0.Add(3 * time.Hour)})
	ended = b.Ended("", 0)
	require.Len(t, ended, 1, "older than an hour are dropped")
	assert.Equal(t, Dropped, ended[0].End.How, "no live reader: nothing says who ended it")
}

func TestOtherEnvsStayOpen(t *testing.T) {
	b := NewBook(0, 0)
	b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0})
	_, ended := b.Observe(Observation{Report: &drift.Report{Env: "staging", Revision: "aaa"}, Now: t0.Add(time.Minute)})
	assert.Empty(t, ended)
	assert.Len(t, b.Open("prod"), 1)
}

func TestMissingAndExtraObjects(t *testing.T) {
	extra := &drift.Report{Env: "prod", Revision: "aaa", Objects: []drift.Object{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm", Name: "debug", Status: drift.Extra,
			Creator: &drift.Writer{Manager: "kubectl-create", Time: t0.Format(time.RFC3339)},
			Actor:   &drift.Actor{User: "alice", Verb: "create", Time: t0.Add(300 * time.Millisecond).Format(time.RFC3339Nano)}},
		{APIVersion: "v1", Kind: "Service", Namespace: "llm", Name: "vllm", Status: drift.Missing},
	}}
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "vllm", "namespace": "llm"}}}
	svc.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "argocd-controller", Operation: metav1.ManagedFieldsOperationApply,
		Time: &metav1.Time{Time: t0.Add(time.Minute)}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}})
	b := NewBook(0, 0)
	opened, _ := b.Observe(Observation{Report: extra, Now: t0.Add(time.Second)})
	require.Len(t, opened, 2)
	require.Equal(t, "ConfigMap", opened[0].Kind)
	require.NotNil(t, opened[0].Actor)
	assert.Equal(t, "alice", opened[0].Actor.User, "who created the Extra object")
	assert.Equal(t, t0.Add(300*time.Millisecond), opened[0].Start)
	_, ended := b.Observe(Observation{Report: &drift.Report{Env: "prod", Revision: "aaa"}, Now: t0.Add(2 * time.Minute),
		Live: func(_, _, kind, _, _ string) (*unstructured.Unstructured, bool) {
			if kind == "Service" {
				return svc, true
			}
			return nil, false
		}})
	require.Len(t, ended, 2)
	how := map[string]string{}
	for _, e := range ended {
		how[e.Kind] = e.End.How
	}
	assert.Equal(t, map[string]string{"ConfigMap": Deleted, "Service": Reverted}, how)
}

func TestAdoptedNamesTheAdopterOrDrops(t *testing.T) {
	kept := liveIs(deployment(3, map[string]time.Time{"kubectl-edit": t0}))
	tests := []struct {
		name    string
		adopter func(Episode, string) (*Commit, bool)
		want    string
		commit  string
		at      time.Time
	}{
		{name: "the commit that put 3 into Git, before the docs commit synced with it",
			adopter: func(e Episode, rev string) (*Commit, bool) {
				assert.Equal(t, "aaa", e.Revision)
				assert.Equal(t, "ccc", rev)
				return &Commit{SHA: "bbb", Subject: "prod: 3 replicas", Date: t0.Add(5 * time.Minute)}, true
			},
			want: Adopted, commit: "bbb", at: t0.Add(5 * time.Minute)},
		{name: "Git no longer declares replicas", adopter: func(Episode, string) (*Commit, bool) { return nil, false }, want: Dropped, at: t0.Add(time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook(0, 0)
			b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0})
			_, ended := b.Observe(Observation{Report: &drift.Report{Env: "prod", Revision: "ccc"}, Live: kept, Adopter: tc.adopter, Now: t0.Add(time.Hour)})
			require.Len(t, ended, 1)
			assert.Equal(t, tc.want, ended[0].End.How)
			assert.Equal(t, tc.at, ended[0].End.At, "adopted when the commit was made, not when the daemon saw it")
			if tc.commit != "" {
				assert.Equal(t, tc.commit, ended[0].End.Commit.SHA)
			}
		})
	}
}

func TestUnknownObjectsNeitherOpenNorEnd(t *testing.T) {
	b := NewBook(0, 0)
	b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0})
	unknown := &drift.Report{Env: "prod", Revision: "aaa", Objects: []drift.Object{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm", Name: "vllm", Status: drift.Unknown},
		{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", Namespace: "llm", Name: "vllm", Status: drift.Unknown},
	}}
	opened, ended := b.Observe(Observation{Report: unknown, Now: t0.Add(time.Minute)})
	assert.Empty(t, opened, "a kind the cluster does not serve is no drift")
	assert.Empty(t, ended, "an object that could not be compared has not ended its drift")
	assert.Len(t, b.Open("prod"), 1)
}

func TestThePersonLearntLaterIsSaved(t *testing.T) {
	b := NewBook(0, 0)
	b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0})
	require.True(t, b.TakeDirty())
	b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, nil), Now: t0.Add(time.Second)})
	assert.False(t, b.TakeDirty(), "nothing new")
	alice := &drift.Actor{User: "alice", Time: t0.Add(-time.Second).Format(time.RFC3339)}
	b.Observe(Observation{Report: replicasDrift("aaa", 3, "kubectl-edit", t0, alice), Now: t0.Add(2 * time.Second)})
	assert.True(t, b.TakeDirty(), "the person arrived: the book must be saved")
	assert.Equal(t, "alice", b.Open("prod")[0].Actor.User)
}
