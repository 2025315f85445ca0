package adopt

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// appManifest is where Git declares an Application as a plain manifest: document doc of file.
type appManifest struct {
	file string
	doc  int
	// source is the path of the Application's source in the document: spec.source, or
	// spec.sources and the index of the one adopted into.
	source []step
}

// app reads the Application from the manifest as the tree holds it.
func (m appManifest) app(t *tree) (*argocd.App, map[string]any, error) {
	data, _ := t.file(m.file)
	docs, err := yamlValues(data)
	if err != nil || m.doc >= len(docs) {
		return nil, nil, fmt.Errorf("%s: %v", m.file, err)
	}
	obj, ok := docs[m.doc].(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not an object", m.file)
	}
	app, err := argocd.FromUnstructured(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.file, err)
	}
	return app, obj, nil
}

// set writes value at path (from the adopted source: spec.source or spec.sources[j]) in the
// manifest.
func (m appManifest) set(t *tree, p []step, value any) (*tree, error) {
	data, _ := t.file(m.file)
	e := &yamlEdit{name: m.file, data: data}
	if err := e.set(m.doc, append(append([]step(nil), m.source...), p...), value); err != nil {
		return nil, err
	}
	return t.with(m.file, e.data), nil
}

// findManifest finds the file that declares o's Application as a plain manifest, from
// o.AppSource: the file itself (a root applied by hand), or the document among the repository's
// files that declares the Application with the very source the render of AppSource gives it
// (a manifest a kustomization patches, or a Helm chart of Applications makes, is not plain).
// why says where to set the value instead when there is none.
func findManifest(t *tree, o drift.Object) (appManifest, string, error) {
	ns, name, _ := strings.Cut(o.Application, "/")
	if name == "" {
		ns, name = "", o.Application
	}
	src := o.AppSource
	switch ext := path.Ext(src); {
	case src == "":
		return appManifest{}, "the file that declares its Application " + o.Application + " is not known: set the value in that Application's options", nil
	case strings.HasPrefix(src, drift.GeneratedSource):
		return appManifest{}, fmt.Sprintf("its Application %s is generated from %s: set the value in that template", o.Application, src), nil
	case strings.Contains(src, " "):
		return appManifest{}, fmt.Sprintf("its Application %s is declared by what %s renders, not a plain file: set the value there", o.Application, src), nil
	case ext == ".yaml" || ext == ".yml" || ext == ".json":
		data, _ := t.file(src)
		if doc := declares(data, ns, name, nil); doc >= 0 {
			return appManifest{file: src, doc: doc}, "", nil
		}
		return appManifest{}, fmt.Sprintf("%s does not declare its Application %s: set the value in that Application's options", src, o.Application), nil
	}
	res, err := t.render(render.AppTarget(src), render.Variant{})
	if err != nil {
		return appManifest{}, "", fmt.Errorf("render %s, which declares Application %s: %w", src, o.Application, err)
	}
	var rendered map[string]any
	for _, u := range res.Objects {
		if u.GetKind() == "Application" && u.GetName() == name && (ns == "" || u.GetNamespace() == ns) {
			rendered = u.Object
		}
	}
	if rendered == nil {
		return appManifest{}, fmt.Sprintf("%s does not render its Application %s: set the value in that Application's options", src, o.Application), nil
	}
	spec, _ := rendered["spec"].(map[string]any)
	var found []appManifest
	for _, p := range t.paths() {
		if e := path.Ext(p); e != ".yaml" && e != ".yml" && e != ".json" {
			continue
		}
		data, _ := t.file(p)
		if !bytes.Contains(data, []byte("Application")) || !bytes.Contains(data, []byte(name)) {
			continue
		}
		if doc := declares(data, ns, name, spec); doc >= 0 {
			found = append(found, appManifest{file: p, doc: doc})
		}
	}
	var under []appManifest
	for _, m := range found {
		if strings.HasPrefix(m.file, src+"/") {
			under = append(under, m)
		}
	}
	switch {
	case len(under) == 1:
		return under[0], "", nil
	case len(found) == 1:
		return found[0], "", nil
	case len(found) == 0:
		return appManifest{}, fmt.Sprintf("no file declares its Application %s as %s renders it (a kustomization's patch or generator makes it): set the value where %s sets it", o.Application, src, src), nil
	}
	var files []string
	for _, m := range found {
		files = append(files, m.file)
	}
	return appManifest{}, fmt.Sprintf("several files declare its Application %s as %s renders it (%s): set the value in the one that counts", o.Application, src, strings.Join(files, ", ")), nil
}

// declares is the index of the document of data that declares Application name (in namespace
// ns, when given), with spec's source and sources when spec is given; -1 when none does.
func declares(data []byte, ns, name string, spec map[string]any) int {
	docs, err := yamlValues(data)
	if err != nil {
		return -1
	}
	for i, d := range docs {
		obj, _ := d.(map[string]any)
		meta, _ := obj["metadata"].(map[string]any)
		api, _ := obj["apiVersion"].(string)
		if obj["kind"] != "Application" || !strings.HasPrefix(api, "argoproj.io/") || meta["name"] != name {
			continue
		}
		if mns, _ := meta["namespace"].(string); ns != "" && mns != "" && mns != ns {
			continue
		}
		if spec != nil {
			own, _ := obj["spec"].(map[string]any)
			if !equalValue(own["source"], spec["source"]) || !equalValue(own["sources"], spec["sources"]) {
				continue
			}
		}
		return i
	}
	return -1
}
