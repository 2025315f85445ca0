package auditlog

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// vllmObject is vllm-qwen as an admission request carries it.
func vllmObject(t *testing.T, sp vllmSpec) runtime.RawExtension {
	t.Helper()
	ctr := map[string]any{"name": "vllm", "image": sp.image}
	obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": vllm.Name, "namespace": vllm.Namespace, "uid": "u1", "resourceVersion": "5",
			"managedFields": []any{
				map[string]any{"manager": "argocd-controller", "operation": "Apply", "time": "2026-11-30T08:00:00Z"},
				map[string]any{"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-30T09:00:00Z"}}},
		"spec": map[string]any{"replicas": sp.replicas, "template": map[string]any{"spec": map[string]any{"containers": []any{ctr}}}}}
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	return runtime.RawExtension{Raw: raw}
}

// admissionUpdate is user's update of vllm-qwen from old to new as the API server asks about it.
func admissionUpdate(t *testing.T, user string, old, new vllmSpec) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{UID: types.UID("review-" + user), Operation: admissionv1.Update,
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: vllm.Namespace, Name: vllm.Name,
		UserInfo: authnv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}},
		Object:   vllmObject(t, new), OldObject: vllmObject(t, old)}
}

// TestAdmissionNamesThePersonByWhatIsLive: the person of an admitted write is named when what it
// left is live, from the admission source; a write admitted and then refused (a later admission
// step, a quota) is never named, even when it is the newest write to the field, and the write
// that did set the live value wins; a refused write of a value someone else then really wrote
// loses to that later write.
func TestAdmissionNamesThePersonByWhatIsLive(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	base := vllmSpec{replicas: 1, image: "vllm:0.11"}
	edit := drift.Writer{Manager: "kubectl-edit", Operation: "Update", Time: "2026-11-30T09:00:00Z"}
	field := func(path string, live any) *drift.Field {
		return &drift.Field{Path: path, Live: live, Change: drift.Changed, Writer: edit}
	}
	live := Live{UID: "u1", ResourceVersion: "9"}

	s := NewStore(0)
	s.AddAdmission("", admissionUpdate(t, "alice", base, vllmSpec{replicas: 3, image: "vllm:0.11"}), t0)
	a := s.Who(vllm, live, field(replicasPath, int64(3)), "argocd-controller")
	require.NotNil(t, a)
	assert.Equal(t, "alice", a.User)
	assert.Equal(t, SourceAdmission, a.From)
	assert.Equal(t, MatchChanges, a.Match)
	assert.Equal(t, "update", a.Verb)

	// mallory's write to 7 was admitted, then refused: live stays alice's 3.
	s.AddAdmission("", admissionUpdate(t, "mallory", vllmSpec{replicas: 3, image: "vllm:0.11"}, vllmSpec{replicas: 7, image: "vllm:0.11"}), t0.Add(time.Minute))
	a = s.Who(vllm, live, field(replicasPath, int64(3)), "argocd-controller")
	require.NotNil(t, a)
	assert.Equal(t, "alice", a.User, "the refused write is passed over")

	// Nobody seen set the live 5: mallory's refused write is not named, nor by manager and time.
	a = s.Who(vllm, live, field(replicasPath, int64(5)), "argocd-controller")
	assert.Nil(t, a, "no admitted write left 5")

	// mallory's refused image write, then bob's real write of that same image: bob's.
	s.AddAdmission("", admissionUpdate(t, "mallory", vllmSpec{replicas: 3, image: "vllm:0.11"}, vllmSpec{replicas: 3, image: "vllm:0.13"}), t0.Add(2*time.Minute))
	s.AddAdmission("", admissionUpdate(t, "bob", vllmSpec{replicas: 3, image: "vllm:0.11"}, vllmSpec{replicas: 3, image: "vllm:0.13"}), t0.Add(3*time.Minute))
	a = s.Who(vllm, live, field(imagePath, "vllm:0.13"), "argocd-controller")
	require.NotNil(t, a)
	assert.Equal(t, "bob", a.User)

	ws := s.Writes(vllm, "u1")
	require.Len(t, ws, 4)
	assert.Equal(t, "kubectl-edit", ws[0].Manager, "the manager of the newest managedFields entry")
	assert.Empty(t, ws[0].ResourceVersion, "an admitted object still has the resourceVersion it was read at")
}

// TestAdmissionDeleteCreateDryRunSecret: a delete names its person when the object is gone, a
// create when the live object has its UID; a dry run is not a write; a Secret's data never
// reaches the store.
func TestAdmissionDeleteCreateDryRunSecret(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStore(0)
	del := admissionUpdate(t, "alice", vllmSpec{replicas: 1}, vllmSpec{})
	del.Operation, del.Object = admissionv1.Delete, runtime.RawExtension{}
	s.AddAdmission("", del, t0)
	a := s.Deleter(vllm)
	require.NotNil(t, a)
	assert.Equal(t, "alice", a.User)
	assert.Equal(t, SourceAdmission, a.From)

	dry := admissionUpdate(t, "bob", vllmSpec{replicas: 1}, vllmSpec{replicas: 4})
	yes := true
	dry.DryRun = &yes
	s.AddAdmission("", dry, t0.Add(time.Minute))
	assert.Len(t, s.Writes(vllm, ""), 1, "a dry run (kubectl diff) is never made")

	create := admissionUpdate(t, "carol", vllmSpec{}, vllmSpec{replicas: 2})
	create.Operation, create.OldObject = admissionv1.Create, runtime.RawExtension{}
	s.AddAdmission("", create, t0.Add(2*time.Minute))
	a = s.Creator(vllm, "u1")
	require.NotNil(t, a)
	assert.Equal(t, "carol", a.User)
	assert.Nil(t, s.Creator(vllm, "u2"), "a create admitted but not the live object's")
	assert.Nil(t, s.Creator(vllm, ""), "a create admitted names nobody without the live UID")

	secret := Object{Resource: "secrets", Namespace: "llm", Name: "hf-token"}
	sec := func(v string) runtime.RawExtension {
		raw, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "hf-token", "namespace": "llm", "uid": "s1",
			"labels": map[string]any{"v": v}}, "data": map[string]any{"token": v}, "stringData": map[string]any{"t": v}})
		return runtime.RawExtension{Raw: raw}
	}
	s.AddAdmission("", &admissionv1.AdmissionRequest{UID: "r", Operation: admissionv1.Update, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "llm", Name: "hf-token",
		UserInfo: authnv1.UserInfo{Username: "alice"}, Object: sec("bmV3"), OldObject: sec("b2xk")}, t0)
	ws := s.Writes(secret, "")
	require.Len(t, ws, 1)
	for _, c := range ws[0].Changes {
		assert.Equal(t, `.metadata.labels.v`, c.Path, "only what is not the Secret's data")
	}
	assert.NotEmpty(t, ws[0].Changes)
}

// TestAdmissionHandlerAllowsAtOnce: every review is answered allowed with its UID before the
// write is recorded; with the queue full a write is dropped, never waited for; a body that is
// not a review is a 400 (the API server's failurePolicy Ignore lets the write through).
func TestAdmissionHandlerAllowsAtOnce(t *testing.T) {
	s := NewStore(0)
	h := NewAdmissionHandler(s, "", 1)
	post := func(req *admissionv1.AdmissionRequest) (*httptest.ResponseRecorder, admissionv1.AdmissionReview) {
		body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/admission", bytes.NewReader(body)))
		var out admissionv1.AdmissionReview
		if rec.Code == http.StatusOK {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		}
		return rec, out
	}
	base := vllmSpec{replicas: 1}
	for _, user := range []string{"alice", "bob"} { // Run not started: the second finds the queue full
		rec, out := post(admissionUpdate(t, user, base, vllmSpec{replicas: 2}))
		require.Equal(t, http.StatusOK, rec.Code)
		require.NotNil(t, out.Response)
		assert.True(t, out.Response.Allowed)
		assert.Equal(t, types.UID("review-"+user), out.Response.UID)
		assert.Equal(t, "AdmissionReview", out.Kind)
	}
	assert.Equal(t, int64(1), h.Dropped())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	require.Eventually(t, func() bool { return s.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "alice", s.Writes(vllm, "")[0].Actor.User)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/admission", bytes.NewReader([]byte("{"))))
	assert.Equal(t, http.StatusBadRequest, rec.Code)
}
