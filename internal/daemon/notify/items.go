package notify

import (
	"sort"
	"strings"

	"github.com/llm-gitops/platform/internal/daemon/message"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Item is one unit of drift: a drifted field of a Modified object, or a whole Missing or
// Extra object (Field nil). Values are already masked (see MaskSecrets).
type Item struct {
	// Key is the dedupe key: env, object, field path, manager and desired revision.
	Key      string `json:"key"`
	Env      string `json:"env"`
	Revision string `json:"revision"`
	// Object is the drifted object with only this item's field (none for Missing/Extra).
	Object drift.Object `json:"object"`
	// Resolution says, once the drift is gone, who set the value Git wants back and how long
	// the drift stood; nil while it stands or when nobody can be named.
	Resolution *Resolution `json:"resolution,omitempty"`
}

// Field returns the item's field, nil for a Missing or Extra object.
func (it Item) Field() *drift.Field {
	if len(it.Object.Fields) == 0 {
		return nil
	}
	return &it.Object.Fields[0]
}

// identity is the key without the revision: the same drift seen against another revision.
func (it Item) identity() string {
	return message.Identity(it.Key)
}

// ObjectRef renders apiVersion/kind/namespace/name of an object ("-" for no namespace), after
// @cluster/ for an object of a cluster other than Argo CD's own.
func ObjectRef(o drift.Object) string {
	ns := o.Namespace
	if ns == "" {
		ns = "-"
	}
	ref := o.APIVersion + "/" + o.Kind + "/" + ns + "/" + o.Name
	if o.Cluster != "" {
		ref = "@" + o.Cluster + "/" + ref
	}
	return ref
}

// ItemKey is the dedupe key of a drift: env, object, field path, manager, desired revision.
func ItemKey(env string, o drift.Object, path, manager, revision string) string {
	return strings.Join([]string{env, ObjectRef(o), path, manager, revision}, "|")
}

// Items splits a report into drift items, masked, sorted by key.
func Items(r *drift.Report) []Item {
	var out []Item
	for _, o := range r.Objects {
		o = MaskSecrets(o)
		if o.Status != drift.Modified || len(o.Fields) == 0 {
			obj := o
			obj.Fields = nil
			manager := ""
			if o.Creator != nil {
				manager = o.Creator.Manager
			}
			out = append(out, Item{Key: ItemKey(r.Env, o, "", manager, r.Revision), Env: r.Env, Revision: r.Revision, Object: obj})
			continue
		}
		for _, f := range o.Fields {
			obj := o
			obj.Fields = []drift.Field{f}
			out = append(out, Item{Key: ItemKey(r.Env, o, f.Path, f.Manager, r.Revision), Env: r.Env, Revision: r.Revision, Object: obj})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// ClusterOfKey is the cluster a dedupe key (see ItemKey) names: "" for Argo CD's own.
func ClusterOfKey(key string) string {
	_, rest, ok := strings.Cut(key, "|")
	ref, _, _ := strings.Cut(rest, "|")
	if !ok || !strings.HasPrefix(ref, "@") {
		return ""
	}
	c, _, _ := strings.Cut(ref[1:], "/")
	return c
}

// ItemFromKey rebuilds the item a dedupe key (see ItemKey) names, without values: env, object,
// field path, writer and revision (empty when the key has none).
func ItemFromKey(key string) (Item, bool) {
	parts := strings.Split(key, "|")
	if len(parts) < 5 {
		return Item{}, false
	}
	env, ref, manager, revision := parts[0], parts[1], parts[len(parts)-2], parts[len(parts)-1]
	path := strings.Join(parts[2:len(parts)-2], "|")
	r := strings.Split(ref, "/")
	var cluster string
	if len(r) > 0 && strings.HasPrefix(r[0], "@") {
		cluster, r = r[0][1:], r[1:]
	}
	if len(r) < 4 {
		return Item{}, false
	}
	o := drift.Object{APIVersion: strings.Join(r[:len(r)-3], "/"), Kind: r[len(r)-3], Namespace: r[len(r)-2], Name: r[len(r)-1], Cluster: cluster}
	if o.Namespace == "-" {
		o.Namespace = ""
	}
	if path != "" {
		o.Status = drift.Modified
		o.Fields = []drift.Field{{Path: path, Writer: drift.Writer{Manager: manager}}}
	} else if manager != "" {
		o.Creator = &drift.Writer{Manager: manager}
	}
	return Item{Key: key, Env: env, Revision: revision, Object: o}, true
}
