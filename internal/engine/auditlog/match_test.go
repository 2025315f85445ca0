package auditlog

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// vllmSpec is the vllm-qwen Deployment a write returns: replicas, the container's image, args
// and env (name=value pairs), annotations.
type vllmSpec struct {
	replicas    int
	image       string
	args        []any
	env         []string
	annotations map[string]any
}

// vllmWrite is a completed write to vllm-qwen by user under manager, returning spec as
// resourceVersion rv, with the request body when not empty.
func vllmWrite(t *testing.T, user, verb, manager, rv string, at time.Time, sp vllmSpec, request string) *auditv1.Event {
	t.Helper()
	ev := event(user, verb, manager, "u1", rv, at)
	ev.ObjectRef.Resource, ev.ObjectRef.Namespace, ev.ObjectRef.Name = vllm.Resource, vllm.Namespace, vllm.Name
	var env []any
	for i := 0; i+1 < len(sp.env); i += 2 {
		env = append(env, map[string]any{"name": sp.env[i], "value": sp.env[i+1]})
	}
	ctr := map[string]any{"name": "vllm", "image": sp.image, "args": sp.args}
	if env != nil {
		ctr["env"] = env
	}
	md := map[string]any{"name": vllm.Name, "namespace": vllm.Namespace, "uid": "u1", "resourceVersion": rv}
	if sp.annotations != nil {
		md["annotations"] = sp.annotations
	}
	obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
		"spec": map[string]any{"replicas": sp.replicas, "template": map[string]any{"spec": map[string]any{"containers": []any{ctr}}}}}
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	ev.ResponseObject = &runtime.Unknown{Raw: raw}
	if request != "" {
		ev.RequestObject = &runtime.Unknown{Raw: []byte(request)}
	}
	return ev
}

const (
	replicasPath = ".spec.replicas"
	imagePath    = ".spec.template.spec.containers[name=vllm].image"
	envXPath     = ".spec.template.spec.containers[name=vllm].env[name=X]"
)

// TestWhoReadsTheWritesChanges: two people with kubectl-edit on one object. Alice's replicas
// drift is hers although bob's later image edit carries the live resourceVersion and moved
// kubectl-edit's managedFields time; bob's removal of an env var is his although alice's later
// edit carries the live resourceVersion; values compare as JSON (3 and 3.0).
func TestWhoReadsTheWritesChanges(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	base := vllmSpec{replicas: 1, image: "vllm:0.11", args: []any{"--a", "--b"}, env: []string{"X", "1", "Y", "2"}}
	step := func(f func(*vllmSpec)) vllmSpec {
		sp := base
		sp.args, sp.env = append([]any(nil), base.args...), append([]string(nil), base.env...)
		f(&sp)
		base = sp
		return sp
	}
	s := NewStore(0)
	s.Add(vllmWrite(t, "argocd", "patch", "argocd-controller", "1", t0, base, `{"spec":{"replicas":1}}`))
	s.Add(vllmWrite(t, "alice", "patch", "kubectl-edit", "2", t0.Add(time.Minute), step(func(sp *vllmSpec) { sp.replicas = 3 }),
		`{"spec":{"replicas":3}}`))
	s.Add(vllmWrite(t, "bob", "patch", "kubectl-edit", "3", t0.Add(2*time.Minute), step(func(sp *vllmSpec) { sp.image = "vllm:0.12" }),
		`{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"vllm"}],"containers":[{"image":"vllm:0.12","name":"vllm"}]}}}}`))
	s.Add(vllmWrite(t, "bob", "patch", "kubectl-set", "4", t0.Add(3*time.Minute), step(func(sp *vllmSpec) { sp.env = []string{"Y", "2"} }),
		`{"spec":{"template":{"spec":{"containers":[{"env":[{"$patch":"delete","name":"X"}],"name":"vllm"}]}}}}`))
	s.Add(vllmWrite(t, "alice", "patch", "kubectl-edit", "5", t0.Add(4*time.Minute), step(func(sp *vllmSpec) { sp.args = []any{"--a", "--c"} }),
		`{"spec":{"template":{"spec":{"containers":[{"args":["--a","--c"],"name":"vllm"}]}}}}`))

	// managedFields: kubectl-edit's time is its last write that changed anything (alice's args).
	edit := drift.Writer{Manager: "kubectl-edit", Operation: "Update", Time: t0.Add(4 * time.Minute).Format(time.RFC3339)}
	cases := []struct {
		name        string
		live        Live
		field       drift.Field
		user, match string
	}{
		{"replicas: alice's write set them, bob's carries the live resourceVersion",
			Live{UID: "u1", ResourceVersion: "3"}, drift.Field{Path: replicasPath, Live: int64(3), Change: drift.Changed, Writer: edit}, "alice", MatchChanges},
		{"replicas after an unlogged status write: not the closest kubectl-edit write",
			Live{UID: "u1", ResourceVersion: "9"}, drift.Field{Path: replicasPath, Live: int64(3), Change: drift.Changed, Writer: edit}, "alice", MatchChanges},
		{"replicas as JSON: 3.0 is 3",
			Live{UID: "u1", ResourceVersion: "9"}, drift.Field{Path: replicasPath, Live: float64(3), Change: drift.Changed, Writer: edit}, "alice", MatchChanges},
		{"the image is bob's",
			Live{UID: "u1", ResourceVersion: "9"}, drift.Field{Path: imagePath, Live: "vllm:0.12", Change: drift.Changed, Writer: edit}, "bob", MatchChanges},
		{"a removed env var: bob's, not alice's write carrying the live resourceVersion",
			Live{UID: "u1", ResourceVersion: "5"}, drift.Field{Path: envXPath, Change: drift.Removed}, "bob", MatchChanges},
		{"an item of an atomic list: the list the write left",
			Live{UID: "u1", ResourceVersion: "9"}, drift.Field{Path: ".spec.template.spec.containers[name=vllm].args[1]", Live: "--c", Change: drift.Changed, Writer: edit}, "alice", MatchChanges},
		{"a value no held change left: the older rules",
			Live{UID: "u1", ResourceVersion: "5"}, drift.Field{Path: replicasPath, Live: int64(7), Change: drift.Changed, Writer: edit}, "alice", MatchResourceVersion},
		{"a field no write touched: the older rules",
			Live{UID: "u1", ResourceVersion: "9"}, drift.Field{Path: ".spec.paused", Live: true, Change: drift.Added, Writer: edit}, "alice", MatchFieldManager},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := s.Who(vllm, tc.live, &tc.field, "argocd-controller")
			require.NotNil(t, a)
			assert.Equal(t, []string{tc.user, tc.match}, []string{a.User, a.Match}, "%s at %s", a.User, a.Time)
		})
	}

	// A newer write that left another value means the live one came from a write whose changes
	// are not known (a replace logged without its response): not alice's.
	s.Add(vllmWrite(t, "carol", "patch", "kubectl-patch", "6", t0.Add(5*time.Minute), step(func(sp *vllmSpec) { sp.replicas = 5 }), `{"spec":{"replicas":5}}`))
	unknown := event("dave", "update", "kubectl-replace", "u1", "7", t0.Add(6*time.Minute))
	unknown.ObjectRef.Resource, unknown.ObjectRef.Namespace, unknown.ObjectRef.Name = vllm.Resource, vllm.Namespace, vllm.Name
	unknown.ResponseObject = nil
	s.Add(unknown)
	a := s.Who(vllm, Live{UID: "u1", ResourceVersion: "8"}, &drift.Field{Path: replicasPath, Live: int64(3), Change: drift.Changed,
		Writer: drift.Writer{Manager: "kubectl-replace", Operation: "Update", Time: t0.Add(6 * time.Minute).Format(time.RFC3339)}}, "argocd-controller")
	require.NotNil(t, a)
	assert.Equal(t, []string{"dave", MatchFieldManager}, []string{a.User, a.Match})
}

// TestLeavesAtAboveAndBelowTheField: a change at the field, above it (a removed parent, an
// atomic list, a map) or below it (a key of a map the field names) says what the write left
// there.
func TestLeavesAtAboveAndBelowTheField(t *testing.T) {
	ch := func(path, kind string, to any) []heldChange {
		return []heldChange{{path: path, to: to, kind: uint8(indexOf(kind))}}
	}
	cases := []struct {
		name            string
		changes         []heldChange
		path            string
		live            any
		removed         bool
		touched, agrees bool
	}{
		{"at the field", ch(replicasPath, drift.Changed, int64(3)), replicasPath, int64(3), false, true, true},
		{"at the field, another value", ch(replicasPath, drift.Changed, int64(4)), replicasPath, int64(3), false, true, false},
		{"elsewhere", ch(imagePath, drift.Changed, "x"), replicasPath, int64(3), false, false, true},
		{"a prefix that is not a parent", ch(".spec.replica", drift.Changed, "x"), replicasPath, int64(3), false, false, true},
		{"removed at the field", ch(envXPath, drift.Removed, nil), envXPath, nil, true, true, true},
		{"a removal is not a live value", ch(envXPath, drift.Removed, nil), envXPath, "1", false, true, false},
		{"its parent removed", ch(".spec.template.spec.containers[name=vllm].env", drift.Removed, nil), envXPath, nil, true, true, true},
		{"a list above it without the item", ch(".spec.template.spec.containers[name=vllm].env", drift.Changed, []any{map[string]any{"name": "Y"}}), envXPath, nil, true, true, true},
		{"a list above it with the item", ch(".spec.template.spec.containers[name=vllm].env", drift.Changed, []any{map[string]any{"name": "X", "value": "1"}}), envXPath, nil, true, true, false},
		{"a keyed item above it", ch(".spec.template.spec.containers[name=vllm]", drift.Added, map[string]any{"name": "vllm", "image": "x"}), imagePath, "x", false, true, true},
		{"a quoted key below a map above", ch(".metadata.annotations", drift.Added, map[string]any{"platform.llm/model": "qwen"}), `.metadata.annotations["platform.llm/model"]`, "qwen", false, true, true},
		{"a key below the field", ch(`.spec.nodeSelector["gpu.type"]`, drift.Added, "l40s"), ".spec.nodeSelector", map[string]any{"gpu.type": "l40s", "zone": "a"}, false, true, true},
		{"a key below the field, removed live too", ch(`.spec.nodeSelector.zone`, drift.Removed, nil), ".spec.nodeSelector", map[string]any{"gpu.type": "l40s"}, false, true, true},
		{"a key below the field, another value", ch(`.spec.nodeSelector.zone`, drift.Changed, "b"), ".spec.nodeSelector", map[string]any{"zone": "a"}, false, true, false},
		{"a capped value above says nothing", ch(".data", drift.Changed, "{\"a\":… (900 bytes of JSON)"), ".data.a", "x", false, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			touched, agrees := leaves(tc.changes, tc.path, tc.live, tc.removed)
			assert.Equal(t, []bool{tc.touched, tc.agrees}, []bool{touched, agrees})
		})
	}
}

func indexOf(kind string) int {
	for i, k := range changeKinds {
		if k == kind {
			return i
		}
	}
	panic(kind)
}

// TestSameValueAsJSON: numbers compare by value whatever their Go type, containers as their
// JSON, a value kept capped by its start and size.
func TestSameValueAsJSON(t *testing.T) {
	long := string(make([]byte, 2000))
	cases := []struct {
		name       string
		held, live any
		same       bool
	}{
		{"int64 and float64", int64(3), float64(3), true},
		{"different numbers", int64(3), float64(3.5), false},
		{"a number and a string", int64(3), "3", false},
		{"nested numbers", map[string]any{"a": []any{int64(1)}}, map[string]any{"a": []any{float64(1)}}, true},
		{"a capped string", capValue(long), long, true},
		{"a capped string of another size", capValue(long), long + "x", false},
		{"a capped map", capValue(map[string]any{"k": long}), map[string]any{"k": long}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, sameValue(tc.held, tc.live))
		})
	}
}

// TestCreatorAndDeleter: an Extra object's creator is the create returning its UID, else the
// newest create whose UID is not known; a Missing object's deleter is the newest delete.
func TestCreatorAndDeleter(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	cm := Object{Resource: "configmaps", Namespace: "llm-rag", Name: "scratch"}
	write := func(user, verb, uid, rv string, at time.Time, sub string, logged bool) *auditv1.Event {
		ev := event(user, verb, "kubectl-create", uid, rv, at)
		ev.ObjectRef.APIGroup, ev.ObjectRef.Resource, ev.ObjectRef.Name, ev.ObjectRef.Subresource = "", "configmaps", "scratch", sub
		ev.ResponseObject = &runtime.Unknown{Raw: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"scratch","uid":"` + uid + `","resourceVersion":"` + rv + `"},"data":{"a":"1"}}`)}
		if !logged {
			ev.ResponseObject = nil
		}
		return ev
	}
	s := NewStore(0)
	s.Add(write("alice", "create", "u1", "1", t0, "", true))
	s.Add(write("bob", "delete", "u1", "2", t0.Add(time.Minute), "", true))
	s.Add(write("carol", "create", "u2", "3", t0.Add(2*time.Minute), "", true))
	s.Add(write("erin", "patch", "u2", "4", t0.Add(3*time.Minute), "", true))
	s.Add(write("dave", "delete", "u2", "5", t0.Add(4*time.Minute), "", true))
	s.Add(write("frank", "create", "", "", t0.Add(5*time.Minute), "", false)) // logged at Metadata: no UID
	s.Add(write("mallory", "create", "", "", t0.Add(6*time.Minute), "token", false))

	cases := []struct {
		name, uid, user string
	}{
		{"the create with the UID", "u1", "alice"},
		{"another create with its UID", "u2", "carol"},
		{"no create with the UID: the newest of unknown UID", "u9", "frank"},
		{"UID not known: the newest create", "", "frank"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := s.Creator(cm, tc.uid)
			require.NotNil(t, a)
			assert.Equal(t, []string{tc.user, MatchCreated, "create"}, []string{a.User, a.Match, a.Verb})
		})
	}
	a := s.Deleter(cm)
	require.NotNil(t, a)
	assert.Equal(t, []string{"dave", MatchDeleted}, []string{a.User, a.Match})
	other := cm
	other.Name = "other"
	assert.Nil(t, s.Deleter(other))
	assert.Nil(t, s.Creator(other, "u1"))

	// Only creates with another UID: nobody.
	s2 := NewStore(0)
	s2.Add(write("alice", "create", "u1", "1", t0, "", true))
	assert.Nil(t, s2.Creator(cm, "u2"))
}
