package auditlog

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Where a person was named from (drift.Actor.From).
const (
	SourceAuditLog     = "audit log"
	SourceAuditWebhook = "audit webhook"
	SourceAdmission    = "admission"
)

// MaxAdmissionBody bounds an AdmissionReview's body (the API server sends the object and the old
// object: a few MB at most, as etcd's own request limit is 1.5 MiB per object).
const MaxAdmissionBody = 8 << 20

// DefaultAdmissionQueue is how many admitted writes wait to be recorded; past it a write is
// dropped (counted) rather than delaying the API server's answer.
const DefaultAdmissionQueue = 4096

var admissionVerbs = map[admissionv1.Operation]string{admissionv1.Create: "create", admissionv1.Update: "update", admissionv1.Delete: "delete"}

// AddAdmission keeps a write the API server asked a validating admission webhook about, received
// at at, for cluster ("" for Argo CD's own). It is a write the API server had not yet made: a
// later admission step (another webhook, a quota) or etcd may still refuse it, and a dry run is
// never made. So its person is named only by its changes (the old object against the object as
// admitted) agreeing with the live value, by the object it created (same UID), or by the delete
// of an object that is gone: never by its manager and time alone. A Secret's data and
// stringData are never kept.
func (s *Store) AddAdmission(cluster string, req *admissionv1.AdmissionRequest, at time.Time) {
	verb, ok := admissionVerbs[req.Operation]
	if !ok || req.DryRun != nil && *req.DryRun || req.SubResource != "" && req.SubResource != "scale" {
		return
	}
	obj, old := decodeObject(req.Object.Raw), decodeObject(req.OldObject.Raw)
	if req.Resource.Group == "" && req.Resource.Resource == "secrets" {
		obj, old = withoutData(obj), withoutData(old)
	}
	name := req.Name
	if name == "" { // a create with generateName: the name the API server chose
		name, _ = metaOf(obj)["name"].(string)
	}
	if name == "" {
		return
	}
	at = at.UTC()
	_, uid := responseMeta(obj)
	if uid == "" {
		_, uid = responseMeta(old)
	}
	key := Object{Cluster: cluster, Group: req.Resource.Group, Resource: req.Resource.Resource, Namespace: req.Namespace, Name: name}
	u := req.UserInfo
	nw := write{at: at, uid: uid, manager: admissionManager(req, obj), subresource: req.SubResource, admitted: true,
		system: strings.HasPrefix(u.Username, "system:"),
		actor:  drift.Actor{User: u.Username, Groups: u.Groups, Verb: verb, Time: at.Format(time.RFC3339), AuditID: string(req.UID), From: SourceAdmission}}
	var changes []drift.FieldChange
	var more bool
	switch {
	case verb == "create":
		nw.changesFrom = created
	case verb == "update" && obj != nil && old != nil:
		changes, more = s.admittedChanges(req, old, obj)
		nw.changesFrom = fromResponses
	}
	var size int
	nw.changes, size, nw.truncated = hold(changes, more)
	nw.changeBytes = int32(size)
	s.insert(key, nw)
}

// admittedChanges diffs the old object against the admitted one (a Scale's spec for the scale
// subresource).
func (s *Store) admittedChanges(req *admissionv1.AdmissionRequest, old, obj map[string]any) ([]drift.FieldChange, bool) {
	before, after := diffable(old), diffable(obj)
	if req.SubResource == "scale" {
		before, after = map[string]any{"spec": old["spec"]}, map[string]any{"spec": obj["spec"]}
	}
	s.respMu.Lock()
	defer s.respMu.Unlock()
	r := &s.resp
	r.get(Object{}) // makes the maps
	var pt = r.typeOf(schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind})
	if req.SubResource == "scale" {
		pt = nil
	}
	changes := diffResponses(before, after, pt, r.intern)
	return changes, len(changes) > maxChanges
}

// admissionManager is the write's field manager: the request's fieldManager option, else the
// manager of the admitted object's newest managedFields entry (the API server has already
// recorded the write there).
func admissionManager(req *admissionv1.AdmissionRequest, obj map[string]any) string {
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	if len(req.Options.Raw) > 0 && json.Unmarshal(req.Options.Raw, &opts) == nil && opts.FieldManager != "" {
		return opts.FieldManager
	}
	entries, _ := metaOf(obj)["managedFields"].([]any)
	type entry struct {
		manager, subresource string
		at                   time.Time
	}
	var es []entry
	for _, e := range entries {
		m, _ := e.(map[string]any)
		name, _ := m["manager"].(string)
		sub, _ := m["subresource"].(string)
		t, _ := m["time"].(string)
		at, _ := time.Parse(time.RFC3339, t)
		if sub == req.SubResource {
			es = append(es, entry{name, sub, at})
		}
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].at.After(es[j].at) })
	if len(es) > 0 {
		return es[0].manager
	}
	return ""
}

func decodeObject(raw []byte) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	var obj map[string]any
	if utiljson.Unmarshal(raw, &obj) != nil {
		return nil
	}
	return obj
}

func metaOf(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	return md
}

// withoutData is a Secret without its values.
func withoutData(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	delete(obj, "data")
	delete(obj, "stringData")
	if md := metaOf(obj); md != nil {
		if a, ok := md["annotations"].(map[string]any); ok {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration") // holds the data too
		}
	}
	return obj
}

// AdmissionHandler observes writes as a validating admission webhook (POST an
// admission.k8s.io/v1 AdmissionReview): it answers allowed at once, whatever the request, and
// records the write in the background. It never refuses and never waits: a body it cannot read
// is still allowed when it has a UID, and a write that finds the queue full is dropped (Dropped
// counts them). Run records; call it once.
type AdmissionHandler struct {
	store   *Store
	cluster string
	queue   chan admitted
	dropped atomic.Int64
	now     func() time.Time
}

type admitted struct {
	req *admissionv1.AdmissionRequest
	at  time.Time
}

// NewAdmissionHandler returns the handler recording into s the writes of cluster ("" for Argo
// CD's own), queue of them waiting at most (DefaultAdmissionQueue when <= 0).
func NewAdmissionHandler(s *Store, cluster string, queue int) *AdmissionHandler {
	if queue <= 0 {
		queue = DefaultAdmissionQueue
	}
	return &AdmissionHandler{store: s, cluster: cluster, queue: make(chan admitted, queue), now: time.Now}
}

// Dropped is how many writes were not recorded because the queue was full.
func (h *AdmissionHandler) Dropped() int64 { return h.dropped.Load() }

// Run records the queued writes until ctx ends.
func (h *AdmissionHandler) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-h.queue:
			h.store.AddAdmission(h.cluster, a.req, a.at)
		}
	}
}

// ServeHTTP answers an AdmissionReview with allowed: true and its UID.
func (h *AdmissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := h.now()
	var review admissionv1.AdmissionReview
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxAdmissionBody+1))
	if err != nil || len(body) > MaxAdmissionBody || json.Unmarshal(body, &review) != nil || review.Request == nil {
		// Not a review the API server could act on: say so. With failurePolicy Ignore the
		// write goes on all the same.
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&out)
	select {
	case h.queue <- admitted{req: req, at: at}:
	default:
		h.dropped.Add(1)
	}
}
