package blame

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// fakeCluster has one live object.
type fakeCluster struct{ obj *unstructured.Unstructured }

func (f fakeCluster) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if gvk.Kind != "Deployment" {
		return nil, fmt.Errorf("no kind %s", gvk.Kind)
	}
	return &meta.RESTMapping{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, GroupVersionKind: gvk}, nil
}

func (f fakeCluster) Get(gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, bool) {
	if f.obj == nil || f.obj.GetName() != name || f.obj.GetNamespace() != ns {
		return nil, false
	}
	return f.obj, true
}

// write is a completed patch of the vllm Deployment by user with a tool, returning replicas.
func write(user, tool, uid, rv string, at time.Time, replicas int) *auditv1.Event {
	resp := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"vllm","namespace":"inference","uid":%q,"resourceVersion":%q},"spec":{"replicas":%d}}`, uid, rv, replicas)
	return &auditv1.Event{Level: auditv1.LevelRequestResponse, AuditID: k8stypes.UID("id-" + rv), Stage: auditv1.StageResponseComplete, Verb: "patch",
		RequestURI: "/apis/apps/v1/namespaces/inference/deployments/vllm?fieldManager=" + tool, UserAgent: "kubectl/v1.37.2",
		User:           authnv1.UserInfo{Username: user, Groups: []string{"platform-oncall"}},
		ObjectRef:      &auditv1.ObjectReference{APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Namespace: "inference", Name: "vllm"},
		ResponseObject: &runtime.Unknown{Raw: []byte(resp)}, StageTimestamp: metav1.NewMicroTime(at)}
}

// TestAddLive: the drift of the object lands on the fields it concerns (a live-only field is a
// field of its own), the writes come newest first with old → new, another incarnation's writes
// are left out.
func TestAddLive(t *testing.T) {
	dir, _ := history(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Name: "vllm"}}, Options{})
	require.NoError(t, err)

	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	people := auditlog.NewStore(0)
	people.Add(write("system:serviceaccount:argocd:argocd-application-controller", "argocd-controller", "u1", "10", t0, 3))
	people.Add(write("alice", "kubectl-edit", "u1", "11", t0.Add(time.Minute), 5))
	people.Add(write("mallory", "kubectl-edit", "old", "1", t0.Add(-time.Hour), 9))
	live := &unstructured.Unstructured{}
	live.SetAPIVersion("apps/v1")
	live.SetKind("Deployment")
	live.SetNamespace("inference")
	live.SetName("vllm")
	live.SetUID("u1")
	live.SetResourceVersion("11")

	alice := &drift.Actor{User: "alice", Verb: "patch", Time: t0.Add(time.Minute).Format(time.RFC3339), Match: "fieldManager"}
	rep := &drift.Report{Env: "prod", Revision: b.Revision, Objects: []drift.Object{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "inference", Name: "vllm",
		Status: drift.Modified, Fields: []drift.Field{
			{Path: ".spec.replicas", FieldPath: drift.FieldPath(fieldpath.MakePathOrDie("spec", "replicas")), Desired: int64(3), Live: int64(5),
				Change: drift.Changed, Writer: drift.Writer{Manager: "kubectl-edit", Operation: "Update"}, Actor: alice},
			{Path: ".metadata.labels.team", FieldPath: drift.FieldPath(fieldpath.MakePathOrDie("metadata", "labels", "team")), Live: "x",
				Change: drift.Added, Writer: drift.Writer{Manager: "kubectl-label", Operation: "Update"}},
		}}}}
	b.AddLive(fakeCluster{live}, people, rep)

	assert.Equal(t, &Live{Found: true, UID: "u1", ResourceVersion: "11", Status: drift.Modified, AuditedRevision: b.Revision, AuditEvents: true}, b.Live)
	var replicas, team *Field
	for i := range b.Fields {
		switch b.Fields[i].Path {
		case ".spec.replicas":
			replicas = &b.Fields[i]
		case ".metadata.labels.team":
			team = &b.Fields[i]
		}
	}
	require.NotNil(t, replicas)
	require.Len(t, replicas.Drift, 1)
	assert.Equal(t, "alice", replicas.Drift[0].Actor.User)
	assert.NotNil(t, replicas.Commit)
	require.NotNil(t, team, "a live-only drifted field is listed")
	assert.Nil(t, team.Commit)
	assert.Nil(t, team.Git)
	assert.Equal(t, b.Fields[len(b.Fields)-1].Path, ".metadata.labels.team", "after Git's fields")

	type w struct {
		User, Tool, From string
		Changes          []Change
	}
	var got []w
	for _, x := range b.Writes {
		got = append(got, w{x.User, x.Tool, x.ChangesFrom, x.Changes})
	}
	want := []w{
		{"alice", "kubectl-edit", auditlog.FromResponses, []Change{{Path: ".spec.replicas", Old: int64(3), New: int64(5), Change: drift.Changed}}},
		{"system:serviceaccount:argocd:argocd-application-controller", "argocd-controller", "", []Change{}}, // first seen, no request body logged
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("writes (-want +got):\n%s", d)
	}
	// The JSON form is what the API serves.
	data, err := json.Marshal(b)
	require.NoError(t, err)
	var back Blame
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, len(b.Fields), len(back.Fields))
	assert.Equal(t, b.Writes[0].Changes[0].Path, back.Writes[0].Changes[0].Path)
}

// TestAddLiveWithoutAudit: without audit events or a report, Live says so and nothing is made up;
// a report of another revision is noted.
func TestAddLiveWithoutAudit(t *testing.T) {
	dir, _ := history(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Name: "vllm"}}, Options{})
	require.NoError(t, err)
	b.AddLive(fakeCluster{}, nil, &drift.Report{Env: "prod", Revision: "0123456789abcdef"})
	assert.Equal(t, &Live{Status: InSync, AuditedRevision: "0123456789abcdef"}, b.Live)
	assert.Empty(t, b.Writes)
	require.Len(t, b.Notes, 2)
	assert.Contains(t, b.Notes[1], "the drift is from an audit of 0123456789ab")
}

// TestAddLiveOnAnotherCluster: blame of an object on another cluster takes that cluster's drift
// and writes alone, though Argo CD's cluster has an object of the same name.
func TestAddLiveOnAnotherCluster(t *testing.T) {
	dir, _ := history(t)
	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	people := auditlog.NewStore(0)
	people.Add(write("mallory", "kubectl-edit", "u-home", "20", t0, 7)) // on Argo CD's cluster
	people.AddFrom("edge", write("bob", "kubectl-edit", "u-edge", "11", t0, 5))
	live := &unstructured.Unstructured{}
	live.SetAPIVersion("apps/v1")
	live.SetKind("Deployment")
	live.SetNamespace("inference")
	live.SetName("vllm")
	live.SetUID("u-edge")
	live.SetResourceVersion("11")
	object := func(cluster string, replicas int64) drift.Object {
		return drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "inference", Name: "vllm", Cluster: cluster,
			Status: drift.Modified, Fields: []drift.Field{{Path: ".spec.replicas", FieldPath: drift.FieldPath(fieldpath.MakePathOrDie("spec", "replicas")),
				Desired: int64(3), Live: replicas, Change: drift.Changed}}}
	}

	for _, tc := range []struct {
		cluster, writer string
		live            int64
	}{{"edge", "bob", 5}, {"", "mallory", 7}} {
		t.Run("cluster "+tc.cluster, func(t *testing.T) {
			b, err := Git(context.Background(), repo, Request{Env: "prod", Object: Ref{Kind: "Deployment", Name: "vllm"}}, Options{})
			require.NoError(t, err)
			rep := &drift.Report{Env: "prod", Revision: b.Revision, Objects: []drift.Object{object("", 7), object("edge", 5)}}
			b.Cluster = tc.cluster
			obj := live.DeepCopy()
			if tc.cluster == "" {
				obj.SetUID("u-home")
			}
			b.AddLive(fakeCluster{obj}, people, rep)
			var replicas *Field
			for i := range b.Fields {
				if b.Fields[i].Path == ".spec.replicas" {
					replicas = &b.Fields[i]
				}
			}
			require.NotNil(t, replicas)
			require.Len(t, replicas.Drift, 1)
			assert.Equal(t, tc.live, replicas.Drift[0].Live, "the drift of another cluster's object")
			require.Len(t, b.Writes, 1)
			assert.Equal(t, tc.writer, b.Writes[0].User, "a write on another cluster")
		})
	}
}
