package drift

import (
	"encoding/json"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TakePeople names, on rep's drifted fields and Missing or Extra objects that name nobody, the
// person from names on the same drift in the same state: same cluster, group, kind, namespace and
// name; for a field, same path, change, managedFields entry (manager, operation, subresource,
// time) and live value; for an object, same status. from is another audit of the same env, such
// as the daemon's, whose sources (the admission webhook, Argo CD's records) this one lacks. A
// Secret's field is never matched: its values are keyed hashes whose key differs between the two.
// It returns how many were named.
func TakePeople(rep, from *Report) int {
	if rep == nil || from == nil {
		return 0
	}
	theirs := map[string]*Object{}
	for i := range from.Objects {
		theirs[peopleKey(&from.Objects[i])] = &from.Objects[i]
	}
	named := 0
	for i := range rep.Objects {
		o := &rep.Objects[i]
		t := theirs[peopleKey(o)]
		if t == nil {
			continue
		}
		if o.Actor == nil && t.Actor != nil && o.Status == t.Status && (o.Status == Missing || o.Status == Extra) {
			o.Actor = t.Actor
			named++
		}
		if o.Kind == "Secret" && groupOf(o.APIVersion) == "" {
			continue
		}
		for j := range o.Fields {
			f := &o.Fields[j]
			if f.Actor != nil {
				continue
			}
			for k := range t.Fields {
				if g := &t.Fields[k]; g.Actor != nil && sameState(f, g) {
					f.Actor = g.Actor
					named++
					break
				}
			}
		}
	}
	return named
}

// peopleKey names an object across reports: cluster, group, kind, namespace, name.
func peopleKey(o *Object) string {
	return o.Cluster + "|" + groupOf(o.APIVersion) + "|" + o.Kind + "|" + o.Namespace + "|" + o.Name
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return apiVersion
	}
	return gv.Group
}

// sameState says whether f and g are one drift as it stands: path, change, managedFields entry
// and live value (compared as JSON: one report may come decoded from the other's JSON).
func sameState(f, g *Field) bool {
	if f.Path != g.Path || f.Change != g.Change || f.Writer != g.Writer {
		return false
	}
	return reflect.DeepEqual(AsJSON(f.Live), AsJSON(g.Live))
}

// AsJSON is v as JSON reads it back (numbers float64, maps map[string]any); v itself when it
// has no JSON form. Values decoded from YAML, from JSON or built in code then compare alike.
func AsJSON(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return v
	}
	return out
}
