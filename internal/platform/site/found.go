package site

import (
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Found is an example name a rendered object still carries.
type Found struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Example is the name (example.com or a subdomain of it).
	Example string `json:"example"`
	// Key is the site key whose value carries it, "" when no key does (the name is written in
	// the manifest itself).
	Key string `json:"key,omitempty"`
}

// Object names the object as "Kind namespace/name".
func (f Found) Object() string {
	if f.Namespace == "" {
		return f.Kind + " " + f.Name
	}
	return f.Kind + " " + f.Namespace + "/" + f.Name
}

// ExamplesIn lists the example names the objects carry in their string values, each once per
// object, in the objects' order; v (nil for none) names the site key behind each.
func ExamplesIn(objs []*unstructured.Unstructured, v *Values) []Found {
	var out []Found
	for _, o := range objs {
		var names []string
		seen := map[string]string{}
		walkStrings(o.Object, func(s string) {
			for _, e := range Examples(s) {
				if _, ok := seen[e]; !ok {
					names = append(names, e)
					seen[e] = ""
				}
				if seen[e] == "" && v != nil {
					seen[e] = v.KeyFor(s)
				}
			}
		})
		sort.Strings(names)
		for _, e := range names {
			out = append(out, Found{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Example: e, Key: seen[e]})
		}
	}
	return out
}

// ExampleKeys lists the site keys whose values are still the template's examples.
func (v *Values) ExampleKeys() []string {
	var out []string
	for _, k := range Keys {
		if len(Examples(v.Values[k.Name])) > 0 {
			out = append(out, k.Name)
		}
	}
	return out
}

// UnchangedKeys lists the keys whose values are the template's own and name no example host
// (issuer, secretStore, nodeRole, clusterName): plausible names that may still be guesses.
func (v *Values) UnchangedKeys() []string {
	var out []string
	for _, k := range Keys {
		if val, ok := v.Values[k.Name]; ok && val == k.Example && len(Examples(val)) == 0 && !realDefaults[k.Name] {
			out = append(out, k.Name)
		}
	}
	return out
}

// Problems lists what is wrong with the values: a key missing, a value that cannot be one.
func (v *Values) Problems() []string {
	var out []string
	for _, k := range Keys {
		val, ok := v.Values[k.Name]
		if !ok {
			out = append(out, k.Name+": not set ("+k.Help+")")
			continue
		}
		if err := k.Check(val); err != nil {
			out = append(out, err.Error())
		}
	}
	var extra []string
	for name := range v.Values {
		if _, ok := Lookup(name); !ok {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		out = append(out, name+": not a site key (known: "+strings.Join(Names(), ", ")+")")
	}
	return out
}

func walkStrings(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case map[string]any:
		for _, x := range v {
			walkStrings(x, fn)
		}
	case []any:
		for _, x := range v {
			walkStrings(x, fn)
		}
	}
}

// realDefaults are the keys whose template value is not an example but what most sites use
// (NVIDIA's own chart repository): kept, it needs no confirming.
var realDefaults = map[string]bool{"nvidiaCharts": true}
