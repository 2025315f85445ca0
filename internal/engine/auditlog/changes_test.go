package auditlog

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

var vllm = Object{Group: "apps", Resource: "deployments", Namespace: "llm-inference", Name: "vllm-qwen"}

// deployWrite is a completed write to vllm-qwen by user, returning the Deployment with replicas
// and image (and the request body, when not empty).
func deployWrite(t *testing.T, user, verb, manager, uid, rv string, at time.Time, replicas int, image, request string) *auditv1.Event {
	t.Helper()
	ev := event(user, verb, manager, uid, rv, at)
	ev.AuditID = types.UID(user + rv)
	ev.ObjectRef.Resource, ev.ObjectRef.Namespace, ev.ObjectRef.Name = vllm.Resource, vllm.Namespace, vllm.Name
	obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": vllm.Name, "namespace": vllm.Namespace, "uid": uid, "resourceVersion": rv, "generation": replicas,
			"labels": map[string]any{"app": "vllm"}},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "vllm", "image": image, "args": []any{"--port=8000"}}}}}},
		"status": map[string]any{"replicas": replicas}}
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	ev.ResponseObject = &k8sruntime.Unknown{Raw: raw}
	if request != "" {
		ev.RequestObject = &k8sruntime.Unknown{Raw: []byte(request)}
	}
	return ev
}

type change struct {
	Path     string
	From, To any
	Change   string
}

func changesOf(w Write) []change {
	var out []change
	for _, c := range w.Changes {
		out = append(out, change{c.Path, c.From, c.To, c.Change})
	}
	return out
}

// TestWritesRecordWhatTheyChanged: each write's response is compared with the previous one held
// for the object; the first write seen (a patch) records what its request set, a create nothing;
// a scale is the replicas; a write to another incarnation, a delete and a Secret's writes record
// nothing, and writes come back newest first.
func TestWritesRecordWhatTheyChanged(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStore(0)
	s.Add(deployWrite(t, "argocd", "patch", "argocd-controller", "u1", "1", t0, 2, "vllm/vllm-openai:v0.11.0",
		`{"metadata":{"labels":{"app":"vllm"}},"spec":{"replicas":2,"$setElementOrder/x":[]}}`))
	s.Add(deployWrite(t, "alice", "patch", "kubectl-edit", "u1", "2", t0.Add(time.Minute), 3, "vllm/vllm-openai:v0.11.0", `{"spec":{"replicas":3}}`))
	s.Add(deployWrite(t, "bob", "patch", "kubectl-set", "u1", "3", t0.Add(2*time.Minute), 3, "vllm/vllm-openai:v0.12.0", ""))
	scale := event("carol", "patch", "", "u1", "4", t0.Add(3*time.Minute))
	scale.ObjectRef.Resource, scale.ObjectRef.Namespace, scale.ObjectRef.Name, scale.ObjectRef.Subresource = vllm.Resource, vllm.Namespace, vllm.Name, "scale"
	scale.ResponseObject = &k8sruntime.Unknown{Raw: []byte(`{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"vllm-qwen","uid":"u1","resourceVersion":"4"},"spec":{"replicas":5}}`)}
	s.Add(scale)
	s.Add(deployWrite(t, "dave", "update", "kubectl-replace", "u1", "5", t0.Add(4*time.Minute), 5, "vllm/vllm-openai:v0.12.0", ""))
	s.Add(deployWrite(t, "erin", "patch", "kubectl-edit", "old", "0", t0.Add(-time.Hour), 9, "x", ""))

	ws := s.Writes(vllm, "u1")
	var users []string
	for _, w := range ws {
		users = append(users, w.Actor.User)
	}
	require.Equal(t, []string{"dave", "carol", "bob", "alice", "argocd"}, users, "newest first, another UID's writes left out")
	cases := []struct {
		user string
		from string
		want []change
	}{
		{"argocd", FromRequest, []change{{".metadata.labels.app", nil, "vllm", Set}, {".spec.replicas", nil, int64(2), Set}}},
		{"alice", FromResponses, []change{{".spec.replicas", int64(2), int64(3), drift.Changed}}},
		{"bob", FromResponses, []change{{".spec.template.spec.containers[name=vllm].image", "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.12.0", drift.Changed}}},
		{"carol", FromResponses, []change{{".spec.replicas", int64(3), int64(5), drift.Changed}}},
		{"dave", FromResponses, nil}, // the scale was taken into the response held: nothing else changed
	}
	for i, tc := range cases {
		w := ws[len(ws)-1-i]
		t.Run(tc.user, func(t *testing.T) {
			assert.Equal(t, tc.user, w.Actor.User)
			assert.Equal(t, tc.from, w.ChangesFrom)
			if d := cmp.Diff(tc.want, changesOf(w), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("changes (-want +got):\n%s", d)
			}
		})
	}

	// A delete forgets the response: the object made again starts over.
	s.Add(deployWrite(t, "frank", "delete", "kubectl", "u1", "6", t0.Add(5*time.Minute), 5, "", ""))
	s.Add(deployWrite(t, "argocd", "create", "argocd-controller", "u2", "7", t0.Add(6*time.Minute), 2, "vllm/vllm-openai:v0.11.0", ""))
	ws = s.Writes(vllm, "u2")
	require.Len(t, ws, 1, "the delete returned u1's object: it is not u2's")
	assert.Equal(t, "create", ws[0].Actor.Verb)
	assert.Empty(t, ws[0].Changes)
	assert.Equal(t, Created, ws[0].ChangesFrom, "a create made every field")

	// A server-side apply that made the object (created no earlier than the request came in) is
	// a create too.
	apply := deployWrite(t, "argocd", "patch", "argocd-controller", "u3", "8", t0.Add(8*time.Minute), 2, "img", `{"spec":{"replicas":2}}`)
	apply.ObjectRef.Name = "other"
	apply.RequestReceivedTimestamp = metav1.NewMicroTime(t0.Add(8*time.Minute - 300*time.Millisecond))
	var obj map[string]any
	require.NoError(t, json.Unmarshal(apply.ResponseObject.Raw, &obj))
	obj["metadata"].(map[string]any)["creationTimestamp"] = t0.Add(8 * time.Minute).Format(time.RFC3339)
	apply.ResponseObject.Raw, _ = json.Marshal(obj)
	s.Add(apply)
	other := vllm
	other.Name = "other"
	assert.Equal(t, Created, s.Writes(other, "")[0].ChangesFrom)

	// A patch within the same second, returning the object the held response is of, did not
	// make it: its changes are known.
	edit := deployWrite(t, "alice", "patch", "kubectl-edit", "u3", "9", t0.Add(8*time.Minute+400*time.Millisecond), 3, "img", `{"spec":{"replicas":3}}`)
	edit.ObjectRef.Name = "other"
	edit.RequestReceivedTimestamp = metav1.NewMicroTime(t0.Add(8*time.Minute + 350*time.Millisecond))
	require.NoError(t, json.Unmarshal(edit.ResponseObject.Raw, &obj))
	obj["metadata"].(map[string]any)["creationTimestamp"] = t0.Add(8 * time.Minute).Format(time.RFC3339)
	edit.ResponseObject.Raw, _ = json.Marshal(obj)
	s.Add(edit)
	w := s.Writes(other, "")[0]
	assert.Equal(t, FromResponses, w.ChangesFrom)
	assert.Equal(t, []change{{".spec.replicas", int64(2), int64(3), drift.Changed}}, changesOf(w))
}

// TestSecretWritesKeepNoValues: even where a policy logs a Secret's bodies, no value of it is
// kept, nor its response.
func TestSecretWritesKeepNoValues(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStore(0)
	secret := Object{Resource: "secrets", Namespace: "llm-rag", Name: "db"}
	for i, v := range []string{"aHVudGVyMg==", "c3dvcmRmaXNo"} {
		ev := event("alice", "patch", "kubectl-edit", "u1", string(rune('1'+i)), t0.Add(time.Duration(i)*time.Minute))
		ev.ObjectRef.APIGroup, ev.ObjectRef.Resource, ev.ObjectRef.Namespace, ev.ObjectRef.Name = "", "secrets", "llm-rag", "db"
		ev.RequestObject = &k8sruntime.Unknown{Raw: []byte(`{"data":{"password":"` + v + `"}}`)}
		ev.ResponseObject = &k8sruntime.Unknown{Raw: []byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"uid":"u1"},"data":{"password":"` + v + `"}}`)}
		s.Add(ev)
	}
	ws := s.Writes(secret, "")
	require.Len(t, ws, 2)
	for _, w := range ws {
		assert.Empty(t, w.Changes)
		assert.Empty(t, w.ChangesFrom)
	}
	s.respMu.Lock()
	defer s.respMu.Unlock()
	assert.Nil(t, s.resp.byObj[secret], "no response of a Secret is held")
}

// TestResponsesHeldAreBounded: past the byte bound, the least recently written object's response
// goes first; its next write records nothing rather than a wrong change.
func TestResponsesHeldAreBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStore(0)
	s.resp.max = 1 // one response at most
	a := deployWrite(t, "alice", "patch", "kubectl-edit", "u1", "1", t0, 1, "img:1", "")
	s.Add(a)
	other := deployWrite(t, "bob", "patch", "kubectl-edit", "u9", "2", t0, 1, "img:1", "")
	other.ObjectRef.Name = "vllm-llama"
	s.Add(other)
	s.Add(deployWrite(t, "alice", "patch", "kubectl-edit", "u1", "3", t0.Add(time.Minute), 2, "img:1", ""))
	w := s.Writes(vllm, "u1")[0]
	assert.NotEqual(t, FromResponses, w.ChangesFrom, "vllm-qwen's response was dropped for vllm-llama's")
	assert.Equal(t, 1, s.resp.lru.Len())
}

// TestLongValuesAreCapped: a value whose JSON is long is kept as its start and its size.
func TestLongValuesAreCapped(t *testing.T) {
	long := string(make([]byte, 2000))
	got, ok := capValue(long).(string)
	require.True(t, ok)
	assert.Less(t, len(got), 400)
	assert.Contains(t, got, "(2000 bytes)")
	assert.Equal(t, int64(3), capValue(int64(3)))
	assert.Equal(t, map[string]any{"a": "b"}, capValue(map[string]any{"a": "b"}))
}

// TestPatchChangesAreWhatTheBodyNames: a change between two responses that the patch's body does
// not name was made in between by a write the policy does not log (the deployment controller's
// status write moves the revision annotation): it is not given to the patch. JSON patches name
// their paths up to the first list index.
func TestPatchChangesAreWhatTheBodyNames(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	withRevision := func(ev *auditv1.Event, rev string) *auditv1.Event {
		var obj map[string]any
		require.NoError(t, json.Unmarshal(ev.ResponseObject.Raw, &obj))
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{"deployment.kubernetes.io/revision": rev}
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		ev.ResponseObject.Raw = raw
		return ev
	}
	s := NewStore(0)
	s.Add(withRevision(deployWrite(t, "argocd", "patch", "argocd-controller", "u1", "1", t0, 2, "img:1", ""), "1"))
	s.Add(withRevision(deployWrite(t, "alice", "patch", "kubectl-edit", "u1", "2", t0.Add(time.Minute), 2, "img:2",
		`{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"vllm"}],"containers":[{"image":"img:2","name":"vllm"}]}}}}`), "2"))
	s.Add(withRevision(deployWrite(t, "bob", "patch", "kubectl-patch", "u1", "3", t0.Add(2*time.Minute), 4, "img:2",
		`[{"op":"replace","path":"/spec/replicas","value":4},{"op":"test","path":"/metadata/annotations","value":{}}]`), "3"))
	ws := s.Writes(vllm, "u1")
	require.Len(t, ws, 3)
	assert.Equal(t, []change{{".spec.replicas", int64(2), int64(4), drift.Changed}}, changesOf(ws[0]), "bob's JSON patch")
	assert.Equal(t, []change{{".spec.template.spec.containers[name=vllm].image", "img:1", "img:2", drift.Changed}}, changesOf(ws[1]), "alice's edit")

	// The first write seen: a JSON patch's exact paths are what it set.
	first := NewStore(0)
	first.Add(deployWrite(t, "bob", "patch", "kubectl-patch", "u1", "3", t0, 4, "img:2",
		`[{"op":"replace","path":"/spec/replicas","value":4},{"op":"remove","path":"/spec/template/spec/containers/0/args"}]`))
	w := first.Writes(vllm, "")[0]
	assert.Equal(t, FromRequest, w.ChangesFrom)
	assert.Equal(t, []change{{".spec.replicas", nil, int64(4), Set}}, changesOf(w), "a path cut at a list index is not a field's")
}

// configMapUpdate is the n-th update of a ConfigMap of 64 keys, every value (480 bytes) changed.
func configMapUpdate(n int, at time.Time) *auditv1.Event {
	ev := event("alice", "update", "kubectl-replace", "u1", fmt.Sprint(n+1), at)
	ev.ObjectRef.APIGroup, ev.ObjectRef.Resource, ev.ObjectRef.Namespace, ev.ObjectRef.Name = "", "configmaps", "llm-rag", "prompts"
	var b strings.Builder
	fmt.Fprintf(&b, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"prompts","namespace":"llm-rag","uid":"u1","resourceVersion":"%d"},"data":{`, n+1)
	for k := range 64 {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"prompt-%02d.txt":"%08d%s"`, k, n, strings.Repeat("x", 472))
	}
	b.WriteString("}}")
	ev.ResponseObject = &k8sruntime.Unknown{Raw: []byte(b.String())}
	return ev
}

// TestChangesHeldAreBoundedInBytes: 2,000 updates to a ConfigMap of 64 keys, each changing every
// value, held 66 KiB of changes per write (130 MiB in all, 6 GiB at 100,000 events). A write now
// keeps 4 KiB of them (marked truncated), and all writes' changes stay within the store's bound,
// the oldest writes' going first: the bytes the store counts and the heap it takes stay small.
func TestChangesHeldAreBoundedInBytes(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	cm := Object{Resource: "configmaps", Namespace: "llm-rag", Name: "prompts"}
	cases := []struct {
		name  string
		limit int // 0: the default
	}{
		{"the per-write bound", 0},
		{"the store's bound", 1 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s := NewStore(0)
			s.LimitChanges(tc.limit)
			for n := range 2000 {
				s.Add(configMapUpdate(n, t0.Add(time.Duration(n)*time.Second)))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			s.mu.Lock()
			accounted, limit := s.changeBytes, s.maxChangeBytes
			s.mu.Unlock()
			t.Logf("changes counted: %d KiB; heap grown: %d KiB", accounted>>10, grown>>10)
			assert.LessOrEqual(t, accounted, limit)
			assert.LessOrEqual(t, accounted, 2000*maxWriteChangeBytes)
			assert.Less(t, grown, int64(24<<20), "the heap the store takes")
			assert.Less(t, grown, int64(2*accounted+4<<20), "what the store counts is near what it takes")

			ws := s.Writes(cm, "u1")
			require.Len(t, ws, 2000)
			newest := ws[0]
			assert.True(t, newest.ChangesTruncated, "64 values of 480 bytes do not fit in 4 KiB")
			assert.NotEmpty(t, newest.Changes)
			assert.Equal(t, FromResponses, newest.ChangesFrom)
			oldest := ws[len(ws)-2] // the first write seen, an update, records nothing
			assert.True(t, oldest.ChangesTruncated)
			if tc.limit > 0 {
				assert.Empty(t, oldest.Changes, "the oldest writes' changes went first")
			}
			runtime.KeepAlive(s)
		})
	}
}

// TestEvictionReleasesTheChangesCounted: the bytes counted go down as writes are evicted.
func TestEvictionReleasesTheChangesCounted(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStore(3)
	for n := range 10 {
		s.Add(configMapUpdate(n, t0.Add(time.Duration(n)*time.Second)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := 0
	for _, h := range s.order {
		sum += int(h.w.changeBytes)
	}
	assert.Equal(t, sum, s.changeBytes)
	assert.Positive(t, sum)
	assert.Len(t, s.order, 3)
}
