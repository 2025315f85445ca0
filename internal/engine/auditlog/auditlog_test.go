package auditlog

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

var qdrant = Object{Group: "apps", Resource: "statefulsets", Namespace: "llm-rag", Name: "qdrant"}

// event is a completed write to qdrant by user with the given field manager, at t, returning
// resourceVersion rv.
func event(user, verb, fieldManager, uid, rv string, t time.Time) *auditv1.Event {
	uri := "/apis/apps/v1/namespaces/llm-rag/statefulsets/qdrant"
	if fieldManager != "" {
		uri += "?fieldManager=" + fieldManager
	}
	return &auditv1.Event{Level: auditv1.LevelRequestResponse, AuditID: types.UID(user + rv), Stage: auditv1.StageResponseComplete,
		RequestURI: uri, Verb: verb, UserAgent: "kubectl/v1.32.0 (linux/amd64) kubernetes/abc",
		User:           authUser(user),
		ObjectRef:      &auditv1.ObjectReference{APIGroup: "apps", APIVersion: "v1", Resource: "statefulsets", Namespace: "llm-rag", Name: "qdrant", UID: types.UID(uid)},
		ResponseObject: &runtime.Unknown{Raw: []byte(`{"metadata":{"resourceVersion":"` + rv + `"}}`)},
		StageTimestamp: metav1.NewMicroTime(t)}
}

// TestWhoMatchesTheWrite: the write that made the live object wins when its manager is the
// field's; else the closest write in time under the field's manager, unless all are older than
// the field's managedFields time; a removal (no manager) is
// the latest write that is not the applier's; another incarnation's writes never count.
func TestWhoMatchesTheWrite(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 14, 0, 0, time.UTC)
	s := NewStore(0)
	s.Add(event("alice", "patch", "kubectl-edit", "", "10", t0))
	s.Add(event("bob", "patch", "kubectl-edit", "", "20", t0.Add(time.Hour)))
	s.Add(event("argocd", "patch", "argocd-controller", "", "30", t0.Add(2*time.Hour)))
	s.Add(event("carol", "patch", "kubectl-set", "old-uid", "5", t0.Add(-time.Hour)))
	edit := &drift.Field{Writer: drift.Writer{Manager: "kubectl-edit", Time: t0.Format(time.RFC3339)}}
	cases := []struct {
		name        string
		live        Live
		field       *drift.Field
		user, match string
	}{
		{"the write that made the live object", Live{UID: "u1", ResourceVersion: "20"}, edit, "bob", "resourceVersion"},
		{"closest in time under the manager", Live{UID: "u1", ResourceVersion: "99"}, edit, "alice", "fieldManager"},
		{"a removal: the latest write not the applier's", Live{UID: "u1", ResourceVersion: "99"}, &drift.Field{}, "bob", "latest write"},
		{"another incarnation does not count", Live{UID: "u1"}, &drift.Field{Writer: drift.Writer{Manager: "kubectl-set"}}, "", ""},
		// The entry was written after every kubectl-edit write held: that write's event is not
		// in yet, and an earlier writer under the same manager is not named in its place.
		{"the write that set the entry is not held yet", Live{UID: "u1", ResourceVersion: "99"},
			&drift.Field{Writer: drift.Writer{Manager: "kubectl-edit", Time: t0.Add(3 * time.Hour).Format(time.RFC3339)}}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := s.Who(qdrant, tc.live, tc.field, "argocd-controller")
			if tc.user == "" {
				assert.Nil(t, a)
				return
			}
			require.NotNil(t, a)
			assert.Equal(t, []string{tc.user, tc.match}, []string{a.User, a.Match})
		})
	}
}

// The same object on two clusters: each cluster's writes name only its own object's people,
// even when the events carry no UID (a Metadata-level policy).
func TestWritesAreTheirClusters(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 14, 0, 0, time.UTC)
	s := NewStore(0)
	s.AddFrom("edge-1", event("bob", "delete", "", "", "7", t0))
	s.Add(event("alice", "patch", "kubectl-edit", "", "8", t0))
	assert.Nil(t, s.Deleter(qdrant), "bob deleted edge-1's qdrant, not this cluster's")
	edge := qdrant
	edge.Cluster = "edge-1"
	if a := s.Deleter(edge); assert.NotNil(t, a) {
		assert.Equal(t, "bob", a.User)
	}
	f := &drift.Field{Writer: drift.Writer{Manager: "kubectl-edit", Time: t0.Format(time.RFC3339)}}
	assert.Nil(t, s.Who(edge, Live{}, f, "argocd-controller"), "alice wrote Argo CD's cluster's qdrant")
	if a := s.Who(qdrant, Live{}, f, "argocd-controller"); assert.NotNil(t, a) {
		assert.Equal(t, "alice", a.User)
	}
}

// TestStoreIsBoundedAndKeepsOnlyWrites: reads, failed writes, status writes and unfinished stages
// are not kept; past the bound the oldest event goes first.
func TestStoreIsBoundedAndKeepsOnlyWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStore(3)
	get := event("x", "get", "", "", "1", t0)
	failed := event("x", "patch", "kubectl-edit", "", "1", t0)
	failed.ResponseStatus = &metav1.Status{Code: 409}
	status := event("x", "patch", "kubectl-edit", "", "1", t0)
	status.ObjectRef.Subresource = "status"
	started := event("x", "patch", "kubectl-edit", "", "1", t0)
	started.Stage = auditv1.StageResponseStarted
	for _, ev := range []*auditv1.Event{get, failed, status, started} {
		s.Add(ev)
	}
	assert.Equal(t, 0, s.Len())
	for i, u := range []string{"u0", "u1", "u2", "u3", "u4"} {
		s.Add(event(u, "patch", "kubectl-edit", "", "1", t0.Add(time.Duration(i)*time.Minute)))
	}
	assert.Equal(t, 3, s.Len())
	a := s.Who(qdrant, Live{}, &drift.Field{Writer: drift.Writer{Manager: "kubectl-edit", Time: t0.Format(time.RFC3339)}}, "argocd-controller")
	require.NotNil(t, a)
	assert.Equal(t, "u2", a.User, "u0 and u1 were evicted: the closest left to t0 is u2")
}

// TestSources: the JSON-lines file names the line it cannot read; the webhook takes EventLists.
func TestSources(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	line, err := json.Marshal(event("alice", "patch", "kubectl-edit", "", "1", t0))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, append(append(line, '\n'), []byte("not json\n")...), 0o600))
	s := NewStore(0)
	err = File{Path: path}.Load(context.Background(), s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+":2")
	assert.Equal(t, 1, s.Len(), "the line before the bad one is kept")

	list, err := json.Marshal(auditv1.EventList{Items: []auditv1.Event{*event("bob", "patch", "kubectl-set", "", "2", t0)}})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	Handler(s).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(list)))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, 2, s.Len())
}

func authUser(name string) authnv1.UserInfo {
	return authnv1.UserInfo{Username: name, Groups: []string{"platform-oncall"}}
}

// TestFollowReadsCompleteLinesAsTheyCome: a line still being written is read once its newline
// is; a bad line is skipped and reported, the lines after it are read.
func TestFollowReadsCompleteLinesAsTheyCome(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	one, err := json.Marshal(event("alice", "patch", "kubectl-edit", "", "1", t0))
	require.NoError(t, err)
	two, err := json.Marshal(event("bob", "patch", "kubectl-set", "", "2", t0))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, append(append(one, '\n'), two[:20]...), 0o600))
	s := NewStore(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 10)
	go File{Path: path}.Follow(ctx, s, 10*time.Millisecond, func(err error) { errs <- err })
	require.Eventually(t, func() bool { return s.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.Write(append(append(two[20:], '\n'), []byte("not json\n"+string(one)+"\n")...))
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	require.Eventually(t, func() bool { return s.Len() == 3 }, 5*time.Second, 10*time.Millisecond)
	select {
	case err := <-errs:
		assert.Contains(t, err.Error(), path)
	default:
		t.Error("the bad line was not reported")
	}
}
