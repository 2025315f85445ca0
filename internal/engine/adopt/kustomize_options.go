package adopt

import (
	"fmt"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// kustomizeSource is a kustomization an Application renders with its own kustomize options
// (spec.source.kustomize): its images and replicas are where a drifted image or replica count
// is adopted.
type kustomizeSource struct{ m appManifest }

func (k kustomizeSource) render(t *tree) (*render.Result, error) {
	app, _, err := k.m.app(t)
	if err != nil {
		return nil, err
	}
	opts, err := app.KustomizeOptions(t.snap.Revision)
	if err != nil {
		return nil, err
	}
	return t.render(render.AppTarget(app.Path), render.Variant{Kustomize: opts, Patches: app.KustomizePatches})
}

// candidates are the entries of kustomize.images that name the image of a drifted container
// image, its tag (or digest) made the live one, and the entries of kustomize.replicas whose
// count is Git's value of a drifted replica count, made the live one.
func (k kustomizeSource) candidates(t *tree, o drift.Object, f drift.Field) ([]candidate, error) {
	_, obj, err := k.m.app(t)
	if err != nil {
		return nil, err
	}
	opts, _ := lookupPath(obj, append(append([]step(nil), k.m.source...), "kustomize")).(map[string]any)
	var out []candidate
	els, err := pathElems(f)
	if err != nil {
		return nil, err
	}
	last := els[len(els)-1]
	switch {
	case last.field == "image" && len(els) >= 2 && els[len(els)-2].key != nil:
		desired, _ := f.Desired.(string)
		live, _ := f.Live.(string)
		dName, _ := splitImage(desired)
		lName, lTail := splitImage(live)
		if dName == "" || dName != lName {
			return nil, fmt.Errorf("the live image is another image than Git's (%s): not an image's tag kustomize.images sets", lName)
		}
		images, _ := opts["images"].([]any)
		for i, it := range images {
			entry, _ := it.(string)
			old, name, renamed := strings.Cut(entry, "=")
			if !renamed {
				name = old
			}
			name, _ = splitImage(name)
			if name != dName && !(renamed && old == dName) {
				continue
			}
			repl := name + lTail
			if renamed {
				repl = old + "=" + repl
			}
			out = append(out, candidate{key: "images: " + entry, where: "kustomize images of the Application in " + k.m.file,
				apply: func(t *tree) (*tree, error) { return k.m.set(t, []step{"kustomize", "images", i}, repl) }})
		}
	case f.Path == ".spec.replicas":
		replicas, _ := opts["replicas"].([]any)
		for i, it := range replicas {
			r, _ := it.(map[string]any)
			if !equalValue(r["count"], f.Desired) && fmt.Sprint(r["count"]) != fmt.Sprint(normal(f.Desired)) {
				continue
			}
			out = append(out, candidate{key: fmt.Sprintf("replicas: %v", r["name"]), where: "kustomize replicas of the Application in " + k.m.file,
				apply: func(t *tree) (*tree, error) {
					return k.m.set(t, []step{"kustomize", "replicas", i, "count"}, retype(r["count"], f.Live))
				}})
		}
	default:
		return nil, fmt.Errorf("only an image kustomize.images sets and a count kustomize.replicas sets are adopted into its kustomize options")
	}
	return out, nil
}

// splitImage splits an image reference into its name and the rest: ":tag", "@digest" or both.
func splitImage(ref string) (name, tail string) {
	name = ref
	if i := strings.Index(ref, "@"); i >= 0 {
		name, tail = ref[:i], ref[i:]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tail = name[:i], name[i:]+tail
	}
	return name, tail
}
