package check

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// secretHidden stands for a Secret's value in a Change: never the value, in any output.
const secretHidden = "(value hidden)"

// diffObjects lists objects added, removed or changed from base to head.
func diffObjects(base, head []*unstructured.Unstructured) []Change {
	key := func(o *unstructured.Unstructured) string {
		return o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	var gvks []schema.GroupVersionKind
	for _, o := range head {
		gvks = append(gvks, o.GroupVersionKind())
	}
	types := argocd.StaticSchema(gvks)
	before := map[string]*unstructured.Unstructured{}
	for _, o := range base {
		before[key(o)] = o
	}
	var out []Change
	seen := map[string]bool{}
	for _, o := range head {
		k := key(o)
		seen[k] = true
		c := Change{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
		b, ok := before[k]
		switch {
		case !ok:
			c.Change = "added"
		default:
			c.Fields = drift.CompareRendered(b.Object, o.Object, types.Type(o.GroupVersionKind()))
			if len(c.Fields) == 0 {
				continue
			}
			c.Change = "changed"
			if o.GroupVersionKind().GroupKind() == secretGK {
				for i := range c.Fields { // a Secret's values never leave check: which field changed only
					c.Fields[i].From, c.Fields[i].To = secretHidden, secretHidden
				}
			}
		}
		out = append(out, c)
	}
	for _, o := range base {
		if !seen[key(o)] {
			out = append(out, Change{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Change: "removed"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}
