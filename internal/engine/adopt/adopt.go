package adopt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// ReadFunc reads a file of the repository at the audited revision; name is slash-separated from
// the repository's root. An absent file is an error wrapping fs.ErrNotExist.
type ReadFunc func(name string) ([]byte, error)

// Adoption is the change to Git that makes it say what the cluster says.
type Adoption struct {
	// Diff is a unified diff in Git's format that `git apply` accepts on the revision read; empty
	// when no drifted field can be expressed.
	Diff string
	// Fields is how many drifted fields the diff adopts.
	Fields int
	// Files are the files the change writes, by path, as they are after it (JSONPatch).
	Files map[string][]byte
	// Notes name the fields it cannot express (also comments in the adopt files).
	Notes []string
}

// FileName is the name of the patch file that adopts the live state of an object into an
// overlay: adopt-<kind>-<name>.yaml, kind lower-cased.
func FileName(o drift.Object) string {
	return "adopt-" + strings.ToLower(o.Kind) + "-" + o.Name + ".yaml"
}

// PatchObject builds the strategic-merge patch that makes Git say what the cluster says:
// apiVersion, kind, metadata name/namespace and, at each drifted field's path, the live value
// (changed and added fields) or null (removed fields; a removed keyed list item becomes
// {key..., $patch: delete}). List items addressed by [key=value] become list entries carrying
// the key fields. Fields the patch cannot express (list items addressed by index or by value)
// are returned as notes.
func PatchObject(o drift.Object) (patch map[string]any, notes []string) {
	patch = identity(o)
	_, notes = adoptFields(patch, o)
	return patch, notes
}

func identity(o drift.Object) map[string]any {
	meta := map[string]any{"name": o.Name}
	if o.Namespace != "" {
		meta["namespace"] = o.Namespace
	}
	return map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "metadata": meta}
}

// adoptFields writes the patch value of each field of o into doc and returns how many it could.
func adoptFields(doc map[string]any, o drift.Object) (n int, notes []string) {
	// Without a schema kustomize merges no list: a patch naming one item would replace the list.
	known := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: o.APIVersion, Kind: o.Kind}) != nil
	for _, f := range o.Fields {
		if f.Path == ".metadata.managedFields" {
			notes = append(notes, f.Path+": the API server's record of field owners, not a value Git sets; nothing to adopt")
			continue
		}
		els, err := pathElems(f)
		if err == nil && !known && hasKey(els) {
			err = fmt.Errorf("list item of a kind kustomize has no schema for: it would replace the whole list")
		}
		if err == nil {
			_, err = put(doc, els, patchValue(f))
		}
		if err != nil {
			note := fmt.Sprintf("%s: not expressible as a strategic-merge patch (%v); edit it by hand", f.Path, err)
			notes = append(notes, strings.ReplaceAll(note, "\n", " "))
			continue
		}
		n++
	}
	return n, notes
}

// Patch is the change that adopts the drifted fields of objs into overlays/<env>/ of Git,
// against the files read returns (the repository at the audited revision): per object an adopt
// file (FileName) holding the strategic-merge patch of its drifted fields' live values,
// created, or merged into when it is already there, and listed in the overlay's kustomization —
// under patches:, or under transformers: (as an inline PatchTransformer) when a transformer of
// that kustomization that kustomize runs after its patches (images:, labels:, replicas:, ...)
// would set one of the fields back. Rendered with the change, each adopted field equals its live
// value.
func Patch(env string, read ReadFunc, objs ...drift.Object) (*Adoption, error) {
	return PatchIn(path.Join("overlays", env), read, objs...)
}

// PatchIn is Patch into the kustomization of directory dir (an Application's path).
func PatchIn(dir string, read ReadFunc, objs ...drift.Object) (*Adoption, error) {
	ov := &overlay{dir: dir, read: read}
	kust, err := ov.kustomization()
	if err != nil {
		return nil, err
	}
	a := &Adoption{}
	for _, o := range objs {
		n, notes, err := ov.adopt(o, kust)
		if err != nil {
			ns := o.Namespace
			if ns == "" {
				ns = "-"
			}
			return nil, fmt.Errorf("adopt %s/%s/%s/%s: %w", o.APIVersion, o.Kind, ns, o.Name, err)
		}
		a.Fields += n
		a.Notes = append(a.Notes, notes...)
	}
	ov.write(path.Base(kust.name), kust.bytes())
	var changes []fileChange
	for _, c := range ov.files {
		if c.path != kust.name && (c.before == nil || !bytes.Equal(c.before, c.after)) {
			changes = append(changes, *c)
		}
	}
	for _, c := range ov.files { // the kustomization last: after the files it lists
		if c.path == kust.name && !bytes.Equal(c.before, c.after) {
			changes = append(changes, *c)
		}
	}
	if a.Diff, err = unifiedDiff(changes); err != nil {
		return nil, fmt.Errorf("adopt patch: %w", err)
	}
	return a, nil
}

// overlay is the files of one overlay as read and as the adoption changes them.
type overlay struct {
	dir   string
	read  ReadFunc
	files []*fileChange // in the order first written; before nil for a new file
}

// file returns the current content of an overlay file and whether it exists.
func (ov *overlay) file(name string) ([]byte, bool, error) {
	p := path.Join(ov.dir, name)
	for _, c := range ov.files {
		if c.path == p {
			return c.after, true, nil
		}
	}
	data, err := ov.read(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read %s: %w", p, err)
	}
	if data == nil {
		data = []byte{}
	}
	ov.files = append(ov.files, &fileChange{path: p, before: data, after: data})
	return data, true, nil
}

func (ov *overlay) write(name string, data []byte) {
	p := path.Join(ov.dir, name)
	for _, c := range ov.files {
		if c.path == p {
			c.after = data
			return
		}
	}
	ov.files = append(ov.files, &fileChange{path: p, after: data})
}

// kustomization reads the overlay's kustomization file.
func (ov *overlay) kustomization() (*kustFile, error) {
	for _, name := range kustomizationNames {
		data, ok, err := ov.file(name)
		if err != nil {
			return nil, err
		}
		if ok {
			return parseKust(path.Join(ov.dir, name), data)
		}
	}
	return nil, fmt.Errorf("%s: no kustomization.yaml", ov.dir)
}

// adopt writes o's fields into its adopt file and lists the file in kust. The file is
// FileName(o), or with -2, -3, ... before .yaml when a file of that name is there and is not
// a patch of o that can be merged into.
func (ov *overlay) adopt(o drift.Object, kust *kustFile) (int, []string, error) {
	base := strings.TrimSuffix(FileName(o), ".yaml")
	for i := 1; i < 10; i++ {
		name := base + ".yaml"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.yaml", base, i)
		}
		data, exists, err := ov.file(name)
		if err != nil {
			return 0, nil, err
		}
		doc, head := identity(o), []string(nil)
		if exists {
			var ok bool
			if doc, head, ok = parseAdoptFile(data, o); !ok {
				continue
			}
		}
		n, notes := adoptFields(doc, o)
		if n == 0 {
			return 0, notes, nil
		}
		body, err := yaml.Marshal(doc)
		if err != nil {
			return 0, nil, err
		}
		for _, note := range notes {
			if c := "# " + note; !contains(head, c) {
				head = append(head, c)
			}
		}
		ov.write(name, append([]byte(joinLines(head)), body...))
		return n, notes, list(kust, name, doc)
	}
	return 0, nil, fmt.Errorf("%s: %s-2 to -9.yaml are taken by other content", ov.dir, base)
}

// list names the adopt file in the kustomization: under patches:, or under transformers: when a
// transformer kustomize runs after patches: would change one of its fields (moving it there if
// patches: lists it).
func list(kust *kustFile, name string, doc map[string]any) error {
	after := kust.overriddenBy(doc)
	where, i := kust.listedIn(name)
	switch {
	case where == "transformers" || (where != "" && after == ""):
		return nil
	case where != "":
		if err := kust.removeItem(where, i); err != nil {
			return err
		}
	}
	if after == "" {
		return kust.appendItem("patches", []string{"path: " + name})
	}
	return kust.appendItem("transformers", []string{"|-",
		"# here, not under patches:, as kustomize runs " + after + " after patches:",
		"apiVersion: builtin",
		"kind: PatchTransformer",
		"metadata:",
		"  name: " + strings.TrimSuffix(name, ".yaml"),
		"path: " + name})
}

// parseAdoptFile reads an adopt file already in the overlay: its leading comment lines and its
// patch, when that is one document patching o.
func parseAdoptFile(data []byte, o drift.Object) (doc map[string]any, head []string, ok bool) {
	lines := splitLines(string(data))
	i := 0
	for i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == "") {
		i++
	}
	head = lines[:i]
	rest := strings.Join(lines[i:], "\n")
	if strings.HasPrefix(rest, "---") || strings.Contains(rest, "\n---") {
		return nil, nil, false
	}
	js, err := yaml.YAMLToJSON([]byte(rest))
	if err != nil {
		return nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // numbers stay as written
	if dec.Decode(&doc) != nil || doc == nil {
		return nil, nil, false
	}
	name, _, _ := nested(doc, "metadata", "name")
	ns, _, _ := nested(doc, "metadata", "namespace")
	if doc["apiVersion"] != o.APIVersion || doc["kind"] != o.Kind || name != o.Name || (ns != nil && ns != o.Namespace) {
		return nil, nil, false
	}
	return doc, head, true
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
