package perf

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/live"
)

// eventsPerObject is how many write events the store holds per object of the corpus.
const eventsPerObject = 10

// people builds a store of len(objs)*10 write events to the corpus' objects. The drifted ones
// (every 100th, a Deployment scaled by hand) get a realistic history: the sync's server-side
// apply that made it, syncs that changed nothing, bob's annotation and restart, carol's image and
// env edits each reverted by a sync, and alice's kubectl scale, each with its request body and the
// full object (or Scale) in the response. The others get syncs whose responses carry only their
// metadata. Events are added in time order, as a log is read.
func people(b *testing.B, objs []*unstructured.Unstructured, cache *live.Cache) *auditlog.Store {
	b.Helper()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := auditlog.NewStore(len(objs) * eventsPerObject)
	var drifted []int
	for i := 0; i < len(objs); i += 100 {
		drifted = append(drifted, i)
	}
	isDrifted := map[int]bool{}
	for _, i := range drifted {
		isDrifted[i] = true
	}
	histories := map[int][]*auditv1.Event{}
	for _, i := range drifted {
		histories[i] = driftedHistory(b, objs[i], cache, t0)
	}
	for k := range eventsPerObject {
		for i, o := range objs {
			if isDrifted[i] {
				s.Add(histories[i][k])
				continue
			}
			s.Add(syncEvent(o, fmt.Sprint(k*len(objs)+i+1), t0.Add(time.Duration(k)*time.Minute)))
		}
	}
	if s.Len() != len(objs)*eventsPerObject {
		b.Fatalf("store holds %d events", s.Len())
	}
	return s
}

// resourceOf is the plural the corpus' kinds are written under.
func resourceOf(kind string) string {
	return strings.ToLower(kind) + "s"
}

func writeEvent(user, verb, manager, sub string, o *unstructured.Unstructured, at time.Time, request, response []byte) *auditv1.Event {
	gvk := o.GroupVersionKind()
	prefix := "/api/v1"
	if gvk.Group != "" {
		prefix = "/apis/" + gvk.Group + "/" + gvk.Version
	}
	uri := fmt.Sprintf("%s/namespaces/%s/%s/%s", prefix, o.GetNamespace(), resourceOf(gvk.Kind), o.GetName())
	if sub != "" {
		uri += "/" + sub
	}
	if manager != "" {
		uri += "?fieldManager=" + manager
	}
	ev := &auditv1.Event{Level: auditv1.LevelRequestResponse, AuditID: types.UID(fmt.Sprintf("%s-%s-%d", user, o.GetName(), at.UnixNano())),
		Stage: auditv1.StageResponseComplete, RequestURI: uri, Verb: verb, UserAgent: "kubectl/v1.34.1 (linux/amd64) kubernetes/93248f9",
		User:      authnv1.UserInfo{Username: user, Groups: []string{"platform-oncall", "system:authenticated"}},
		SourceIPs: []string{"10.0.4.17"},
		ObjectRef: &auditv1.ObjectReference{APIGroup: gvk.Group, APIVersion: gvk.Version, Resource: resourceOf(gvk.Kind),
			Namespace: o.GetNamespace(), Name: o.GetName(), Subresource: sub},
		RequestReceivedTimestamp: metav1.NewMicroTime(at.Add(-20 * time.Millisecond)), StageTimestamp: metav1.NewMicroTime(at)}
	if request != nil {
		ev.RequestObject = &k8sruntime.Unknown{Raw: request}
	}
	if response != nil {
		ev.ResponseObject = &k8sruntime.Unknown{Raw: response}
	}
	return ev
}

// syncEvent is the sync's server-side apply of an object that changed nothing, its response
// carrying only the metadata.
func syncEvent(o *unstructured.Unstructured, rv string, at time.Time) *auditv1.Event {
	resp := fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,"metadata":{"name":%q,"namespace":%q,"uid":"uid-%s","resourceVersion":%q}}`,
		o.GetKind(), o.GetAPIVersion(), o.GetName(), o.GetNamespace(), o.GetName(), rv)
	ev := writeEvent("system:serviceaccount:argocd:argocd-application-controller", "patch", "argocd-controller", "", o, at, nil, resp)
	ev.UserAgent = "argocd-controller/v3.1.8"
	return ev
}

// driftedHistory is the ten writes of a drifted Deployment, oldest first; the last is alice's
// kubectl scale to 5 replicas.
func driftedHistory(b *testing.B, o *unstructured.Unstructured, cache *live.Cache, t0 time.Time) []*auditv1.Event {
	b.Helper()
	l, ok := cache.Get(o.GroupVersionKind(), o.GetNamespace(), o.GetName())
	if !ok {
		b.Fatalf("%s/%s not in the cache", o.GetNamespace(), o.GetName())
	}
	uid := string(l.GetUID())
	applied, err := json.Marshal(o.Object)
	if err != nil {
		b.Fatal(err)
	}
	state := o.DeepCopy()
	rv := 0
	at := func(k int) time.Time { return t0.Add(time.Duration(k) * time.Minute) }
	response := func(k int) []byte {
		rv++
		r := state.DeepCopy()
		r.SetUID(types.UID(uid))
		r.SetResourceVersion(fmt.Sprint(900000 + rv))
		r.SetGeneration(int64(rv))
		r.SetCreationTimestamp(metav1.NewTime(t0))
		ann := r.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["deployment.kubernetes.io/revision"] = fmt.Sprint(1 + k/3)
		r.SetAnnotations(ann)
		_ = unstructured.SetNestedField(r.Object, map[string]any{"replicas": int64(2), "readyReplicas": int64(2)}, "status")
		data, err := json.Marshal(r.Object)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	sync := func(k int) *auditv1.Event {
		ev := writeEvent("system:serviceaccount:argocd:argocd-application-controller", "patch", "argocd-controller", "", o, at(k), applied, response(k))
		ev.UserAgent = "argocd-controller/v3.1.8"
		return ev
	}
	setContainer := func(field string, v any) {
		ctrs, _, _ := unstructured.NestedSlice(state.Object, "spec", "template", "spec", "containers")
		ctrs[0].(map[string]any)[field] = v
		_ = unstructured.SetNestedSlice(state.Object, ctrs, "spec", "template", "spec", "containers")
	}
	image, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	gitImage := image[0].(map[string]any)["image"]
	gitEnv := image[0].(map[string]any)["env"]

	var evs []*auditv1.Event
	evs = append(evs, sync(0), sync(1)) // made by the sync (its creationTimestamp), then a sync that changed nothing
	ann := map[string]string{"platform.llm/note": "investigating OOM"}
	state.SetAnnotations(ann)
	evs = append(evs, writeEvent("bob", "patch", "kubectl-annotate", "", o, at(2), []byte(`{"metadata":{"annotations":{"platform.llm/note":"investigating OOM"}}}`), response(2)))
	_ = unstructured.SetNestedField(state.Object, map[string]any{"kubectl.kubernetes.io/restartedAt": "2026-11-30T09:03:00Z"}, "spec", "template", "metadata", "annotations")
	evs = append(evs, writeEvent("bob", "patch", "kubectl-rollout", "", o, at(3),
		[]byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-30T09:03:00Z"}}}}}`), response(3)))
	evs = append(evs, sync(4))
	setContainer("image", "vllm/vllm-openai:v0.11.1")
	evs = append(evs, writeEvent("carol", "patch", "kubectl-set", "", o, at(5),
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"image":"vllm/vllm-openai:v0.11.1","name":"vllm"}]}}}}`), response(5)))
	setContainer("image", gitImage)
	evs = append(evs, sync(6))
	setContainer("env", []any{map[string]any{"name": "HF_HOME", "value": "/scratch"}})
	evs = append(evs, writeEvent("carol", "patch", "kubectl-edit", "", o, at(7),
		[]byte(`{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"vllm"}],"containers":[{"$setElementOrder/env":[{"name":"HF_HOME"}],"env":[{"name":"HF_HOME","value":"/scratch"}],"name":"vllm"}]}}}}`), response(7)))
	setContainer("env", gitEnv)
	evs = append(evs, sync(8))
	rv++
	scale := fmt.Appendf(nil, `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":"%d","creationTimestamp":"2026-11-30T09:00:00Z"},"spec":{"replicas":5},"status":{"replicas":2,"selector":"app=%s"}}`,
		o.GetName(), o.GetNamespace(), uid, 900000+rv, o.GetName())
	evs = append(evs, writeEvent("alice", "patch", "kubectl-scale", "scale", o, at(9), []byte(`{"spec":{"replicas":5}}`), scale))
	if len(evs) != eventsPerObject {
		b.Fatalf("%d events", len(evs))
	}
	return evs
}
