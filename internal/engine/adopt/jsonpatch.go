package adopt

import (
	"fmt"
	"path"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"
)

// Target selects the object a JSON patch applies to, as a kustomization's patches: target.
type Target struct {
	Kind, Name, Namespace string
}

// Op is one JSON patch (RFC 6902) operation: "test" guards the position of a list item the
// others address by index, so the patch fails to render rather than change another item.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// JSONPatch is the change that writes ops as the JSON patch file name in the kustomization of
// dir (an overlay), listed under patches: with target. A file of that name is replaced; it is
// listed once. head are comment lines at the top of the file. It is how a setting inside a list
// of a custom resource (a KEDA trigger's threshold), which a strategic-merge patch cannot
// express, reaches Git.
func JSONPatch(dir string, read ReadFunc, name string, target Target, head []string, ops []Op) (*Adoption, error) {
	ov := &overlay{dir: dir, read: read}
	kust, err := ov.kustomization()
	if err != nil {
		return nil, err
	}
	if _, _, err := ov.file(name); err != nil { // read it, so the diff shows a replaced file as such
		return nil, err
	}
	body, err := sigsyaml.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("json patch %s: %w", name, err)
	}
	var b strings.Builder
	for _, h := range head {
		b.WriteString("# " + h + "\n")
	}
	b.Write(body)
	ov.write(name, []byte(b.String()))
	if where, _ := kust.listedIn(name); where == "" {
		item := []string{"path: " + name, "target:", "  kind: " + target.Kind, "  name: " + target.Name}
		if target.Namespace != "" {
			item = append(item, "  namespace: "+target.Namespace)
		}
		if err := kust.appendItem("patches", item); err != nil {
			return nil, err
		}
		ov.write(path.Base(kust.name), kust.bytes())
	}
	var changes []fileChange
	for _, c := range ov.files {
		if c.before == nil || string(c.before) != string(c.after) {
			changes = append(changes, *c)
		}
	}
	a := &Adoption{Fields: len(ops), Files: map[string][]byte{}}
	for _, c := range changes {
		a.Files[c.path] = c.after
	}
	if a.Diff, err = unifiedDiff(changes); err != nil {
		return nil, fmt.Errorf("json patch %s: %w", name, err)
	}
	return a, nil
}
