package auditlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// DefaultMaxResponseBytes bounds the responses a Store holds to compute what each write changed:
// the latest one per object, the least recently written object's going first.
const DefaultMaxResponseBytes = 64 << 20

// Where a write's changes come from (Write.ChangesFrom).
const (
	// FromResponses: the write's response compared with the previous response held for the object.
	FromResponses = "responses"
	// FromRequest: the fields the write sent (a patch, or the replicas of a scale), the first write
	// seen to the object: the values before it are not known (From is nil, Change "set").
	FromRequest = "request"
	// Created: the write made the object (a create, or an apply or patch that created it): every
	// field is its.
	Created = "created"
)

// source is where a held write's changes come from: none, FromResponses, FromRequest.
type source uint8

const (
	noSource source = iota
	fromResponses
	fromRequest
	created
)

func (s source) String() string {
	switch s {
	case fromResponses:
		return FromResponses
	case fromRequest:
		return FromRequest
	case created:
		return Created
	}
	return ""
}

// Set is the change of a field a request set with its previous value unknown.
const Set = "set"

// maxChanges bounds the changes kept on one write; maxValueBytes the JSON size of a value kept as
// is (a longer one is kept as the start of its JSON and its size); maxWriteChangeBytes the memory
// one write's changes may take (heldSize): the rest are dropped and the write's changes marked
// truncated.
const (
	maxChanges          = 64
	maxValueBytes       = 512
	maxWriteChangeBytes = 4 << 10
)

// DefaultMaxChangeBytes bounds the memory the changes of all held writes take (heldSize): past
// it, the oldest writes' changes are dropped (the writes stay, marked truncated).
const DefaultMaxChangeBytes = 64 << 20

// Write is one held write to an object, with the fields it changed when they are known.
type Write struct {
	// Actor is who wrote (Match is empty).
	Actor drift.Actor
	// Manager is the field manager (the tool), Subresource the subresource written ("scale").
	Manager, Subresource string
	// UID and ResourceVersion are those of the object the write returned ("" when not logged).
	UID, ResourceVersion string
	// Changes are the fields the write changed, ChangesFrom where they come from: FromResponses,
	// FromRequest, Created (no Changes: every field), or "" when nothing is known (a delete, a
	// Secret — whose values are never kept —, a write logged without its response, an event
	// older than the response held).
	Changes     []drift.FieldChange
	ChangesFrom string
	// ChangesTruncated says Changes are not all the write changed: it changed more than a write
	// may hold (64 fields, 4 KiB), or its changes were dropped, oldest writes' first, to keep the
	// store within its bound (DefaultMaxChangeBytes).
	ChangesTruncated bool
}

// Writes returns the writes held for obj, newest first; writes whose response names another UID
// than uid (an earlier object of that name) are left out when uid is not empty.
func (s *Store) Writes(obj Object, uid string) []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.byObj[obj]
	out := make([]Write, 0, len(ws))
	for i := len(ws) - 1; i >= 0; i-- {
		w := ws[i]
		if uid != "" && w.uid != "" && w.uid != uid {
			continue
		}
		out = append(out, Write{Actor: w.actor, Manager: w.manager, Subresource: w.subresource, UID: w.uid,
			ResourceVersion: w.resourceVersion, Changes: unhold(w.changes), ChangesFrom: w.changesFrom.String(), ChangesTruncated: w.truncated})
	}
	return out
}

// heldChange is a drift.FieldChange as a held write keeps it: a change kind of one byte, no
// structured path (100,000 writes hold a few of them each).
type heldChange struct {
	path     string
	from, to any
	kind     uint8 // index in changeKinds
}

var changeKinds = []string{drift.Changed, drift.Added, drift.Removed, Set}

// hold keeps a write's changes within maxChanges and maxWriteChangeBytes: the size they take
// (heldSize), and whether some were left out (more: the diff already left some out).
func hold(cs []drift.FieldChange, more bool) (out []heldChange, size int, truncated bool) {
	if len(cs) == 0 {
		return nil, 0, more
	}
	cs, truncated = cs[:min(len(cs), maxChanges)], more || len(cs) > maxChanges
	all := make([]heldChange, len(cs))
	size = sliceHeader
	n := 0
	for _, c := range cs {
		h := heldChange{path: c.Path, from: c.From, to: c.To, kind: uint8(slices.Index(changeKinds, c.Change))}
		hs := h.size()
		if size+hs > maxWriteChangeBytes && n > 0 {
			truncated = true
			break
		}
		all[n] = h
		n++
		size += hs
	}
	if n == len(all) {
		return all, size, truncated
	}
	return slices.Clone(all[:n]), size, truncated // not the whole array behind it
}

// Memory estimates (64-bit): a slice, string and interface header, a map's fixed part and the
// slots of one entry (key and value headers, control byte, load factor 7/8), a held change.
const (
	sliceHeader  = 24
	stringHeader = 16
	ifaceHeader  = 16
	mapHeader    = 48
	mapEntry     = 40
	changeStruct = 56
)

// size is what a held change takes: its struct, path (counted even when interned: an upper
// bound), and values.
func (h heldChange) size() int {
	return changeStruct + len(h.path) + heldSize(h.from) + heldSize(h.to)
}

// heldSize estimates the heap a decoded JSON value held in an interface takes beyond the
// interface itself.
func heldSize(v any) int {
	switch x := v.(type) {
	case nil, bool:
		return 0
	case int64, float64:
		return 8
	case string:
		return stringHeader + len(x)
	case map[string]any:
		n := mapHeader
		for k, e := range x {
			n += mapEntry + len(k) + heldSize(e)
		}
		return n
	case []any:
		n := sliceHeader + ifaceHeader*len(x)
		for _, e := range x {
			n += heldSize(e)
		}
		return n
	}
	return 64
}

func unhold(cs []heldChange) []drift.FieldChange {
	if len(cs) == 0 {
		return nil
	}
	out := make([]drift.FieldChange, len(cs))
	for i, c := range cs {
		out[i] = drift.FieldChange{Path: c.path, From: c.from, To: c.to, Change: changeKinds[c.kind]}
	}
	return out
}

// changesOf works out the fields a write to key changed and keeps its response for the next
// write. resp is the write's decoded response (nil when not logged).
// more says the write changed more fields than are listed (maxChanges).
func (s *Store) changesOf(key Object, ev *auditv1.Event, resp map[string]any, uid string, at time.Time) (changes []drift.FieldChange, from source, more bool) {
	if key.Group == "" && key.Resource == "secrets" {
		return nil, noSource, false // never a value of a Secret, whatever the policy logged
	}
	s.respMu.Lock()
	defer s.respMu.Unlock()
	r := &s.resp
	prev := r.get(key)
	if prev != nil && uid != "" && prev.uid != "" && prev.uid != uid {
		r.drop(key) // another object of that name
		prev = nil
	}
	if prev != nil && at.Before(prev.at) {
		return nil, noSource, false // a late event: the response held is newer
	}
	switch {
	case ev.Verb == "delete" && ev.ObjectRef.Subresource == "":
		r.drop(key)
		return nil, noSource, false
	case ev.ObjectRef.Subresource == "scale":
		cs, src := s.scaleChanges(key, prev, resp, at)
		return cs, src, false
	case ev.ObjectRef.Subresource != "":
		return nil, noSource, false
	case resp == nil: // logged without its response: what is held no longer says what is live
		r.drop(key)
		return nil, noSource, false
	}
	next := diffable(resp)
	if len(next) == 0 { // nothing to compare (a response without spec, data or metadata)
		r.drop(key)
		return nil, noSource, false
	}
	raw, err := json.Marshal(next)
	if err != nil {
		r.drop(key)
		return nil, noSource, false
	}
	r.put(key, uid, at, raw)
	// A write returning the UID of the response held did not make the object, even within the
	// second it was made in (creationTimestamp has whole seconds).
	existed := prev != nil && prev.uid != "" && prev.uid == uid
	if ev.Verb == "create" || !existed && madeBy(ev, resp) {
		return nil, created, false
	}
	if prev == nil {
		if cs := requestChanges(ev); len(cs) > 0 {
			return cs, fromRequest, false // hold sees more than maxChanges
		}
		return nil, noSource, false
	}
	if bytes.Equal(prev.raw, raw) {
		return nil, fromResponses, false
	}
	var before map[string]any
	if utiljson.Unmarshal(prev.raw, &before) != nil {
		return nil, noSource, false
	}
	apiVersion, _ := resp["apiVersion"].(string)
	kind, _ := resp["kind"].(string)
	pt := r.typeOf(schema.FromAPIVersionAndKind(apiVersion, kind))
	changes = diffResponses(before, next, pt, r.intern)
	more = len(changes) > maxChanges // the diff stops one past the bound
	if fields, ok := patchFields(ev); ok {
		changes = inPatch(changes, fields)
	}
	return changes, fromResponses, more
}

// madeBy says whether the write made the object (a server-side apply that created it): the
// object was created (creationTimestamp, whole seconds) no earlier than the request came in.
func madeBy(ev *auditv1.Event, resp map[string]any) bool {
	md, _ := resp["metadata"].(map[string]any)
	s, _ := md["creationTimestamp"].(string)
	created, err := time.Parse(time.RFC3339, s)
	if err != nil || ev.RequestReceivedTimestamp.IsZero() {
		return false
	}
	return !created.Before(ev.RequestReceivedTimestamp.Truncate(time.Second))
}

// scaleChanges is a write to the scale subresource (kubectl scale, an HPA): its response is a
// Scale, whose spec.replicas is the object's.
func (s *Store) scaleChanges(key Object, prev *heldResponse, resp map[string]any, at time.Time) ([]drift.FieldChange, source) {
	spec, _ := resp["spec"].(map[string]any)
	replicas, ok := spec["replicas"]
	if !ok {
		return nil, noSource
	}
	path := fieldpath.MakePathOrDie("spec", "replicas")
	if prev == nil {
		return []drift.FieldChange{{Path: drift.Display(path), To: replicas, Change: Set}}, fromRequest
	}
	var obj map[string]any
	if utiljson.Unmarshal(prev.raw, &obj) != nil {
		return nil, noSource
	}
	objSpec, _ := obj["spec"].(map[string]any)
	if objSpec == nil {
		objSpec = map[string]any{}
		obj["spec"] = objSpec
	}
	old, had := objSpec["replicas"]
	if had && reflect.DeepEqual(old, replicas) {
		return nil, fromResponses
	}
	objSpec["replicas"] = replicas
	if raw, err := json.Marshal(obj); err == nil {
		s.resp.put(key, prev.uid, at, raw)
	}
	c := drift.FieldChange{Path: drift.Display(path), From: old, To: replicas, Change: drift.Changed}
	if !had {
		c.Change = drift.Added
	}
	return []drift.FieldChange{c}, fromResponses
}

// diffable is the part of an object a write's changes are looked for in: every top-level field
// but apiVersion, kind and status, and of the metadata only labels and annotations (not
// kubectl's last-applied-configuration, a copy of the object).
func diffable(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "status", "metadata":
		default:
			out[k] = v
		}
	}
	md, _ := obj["metadata"].(map[string]any)
	meta := map[string]any{}
	if l, ok := md["labels"].(map[string]any); ok && len(l) > 0 {
		meta["labels"] = l
	}
	if a, ok := md["annotations"].(map[string]any); ok && len(a) > 0 {
		if _, ok := a["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			c := make(map[string]any, len(a))
			for k, v := range a {
				if k != "kubectl.kubernetes.io/last-applied-configuration" {
					c[k] = v
				}
			}
			a = c
		}
		meta["annotations"] = a
	}
	if len(meta) > 0 {
		out["metadata"] = meta
	}
	return out
}

// capValue keeps a value whose JSON is short; a longer one becomes the start of its JSON and its
// size, so a ConfigMap's file does not stay in memory once per write.
func capValue(v any) any {
	switch x := v.(type) {
	case nil, bool, int64, float64:
		return v
	case string:
		if len(x) <= maxValueBytes {
			return v
		}
		return fmt.Sprintf("%s… (%d bytes)", head(x, maxValueBytes/2), len(x))
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) <= maxValueBytes {
		return v
	}
	return fmt.Sprintf("%s… (%d bytes of JSON)", head(string(b), maxValueBytes/2), len(b))
}

// head is s cut to at most n bytes, at a rune boundary.
func head(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
