package schedule

// Scale-ups of a pinned env. Its overlay is rendered at the commit its release file names, so a
// commit to overlays/<env> on main would not reach it before the next promotion. A scale-up goes
// where a pinned env does read main: its Argo CD Application's spec.source.kustomize.patches
// (apps/<env>), which Argo CD appends to the overlay's patches when it builds. The patch replaces
// the target field; the scale-down reverts that commit, as for an unpinned env.

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// env is the schedule's environment (clusters/<env>/schedule.yaml).
func (s *Schedule) env() string { return path.Base(path.Dir(s.File)) }

// site is where a firing of a peak writes: the target file itself, or, for a pinned env, the file
// holding its Application.
type site struct {
	file string
	// app is set for a pinned env: the Application's file; pin the commit the env runs.
	app, pin string
}

// siteOf finds where peak p's firings write at snap.
func (s *Schedule) siteOf(snap *gitrepo.Snapshot, p *Peak) (site, error) {
	env := s.env()
	r, ok, err := release.Read(snap.Files, env)
	if err != nil {
		return site{}, err
	}
	if !ok || !r.Pinned() {
		return site{file: p.Target.Path}, nil
	}
	prefix := path.Join("apps", env) + "/"
	for name, data := range snap.Files {
		if !strings.HasPrefix(name, prefix) || strings.Contains(name[len(prefix):], "/") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		// A file that does not parse is not the one (as before, when its documents were skipped).
		if docs, err := parseDocs(name, data); err == nil && applicationDoc(docs, env) != nil {
			return site{file: name, app: name, pin: r.Revision}, nil
		}
	}
	return site{}, fmt.Errorf("%s pins %s, and no file of apps/%s holds the Application of overlays/%s to write the scale-up to", release.File(env), env, env, env)
}

// paths are the files whose history holds the peak's firings.
func (st site) paths(p *Peak) []string {
	if st.app == "" {
		return []string{p.Target.Path}
	}
	return []string{p.Target.Path, st.app}
}

// current returns the target field's value where the env reads it: the Application's patch when
// it has one for the field, else the target file (at the pin for a pinned env).
func (st site) current(snap *gitrepo.Snapshot, t Target) (int64, error) {
	if st.app != "" {
		if _, v, ok, err := appPatch(st.app, snap.Files[st.app], t); err != nil || ok {
			return v, err
		}
		data, err := snap.ReadFileAt(st.pin, t.Path)
		if err != nil {
			return 0, err
		}
		loc, err := lookup(data, t)
		return loc.value, err
	}
	data, ok := snap.Files[t.Path]
	if !ok {
		return 0, fmt.Errorf("target file %s not found at %s", t.Path, gitrepo.Short(snap.Revision))
	}
	loc, err := lookup(data, t)
	return loc.value, err
}

// set returns the site's file with the target field at value, the previous value and the line.
func (st site) set(snap *gitrepo.Snapshot, t Target, value int64) (out []byte, from int64, line int, err error) {
	if st.app == "" {
		data, ok := snap.Files[t.Path]
		if !ok {
			return nil, 0, 0, fmt.Errorf("target file %s not found at %s", t.Path, gitrepo.Short(snap.Revision))
		}
		return setField(data, t, value)
	}
	if from, err = st.current(snap, t); err != nil {
		return nil, 0, 0, err
	}
	out, line, err = setAppPatch(snap.Files[st.app], st.app, t, value)
	return out, from, line, err
}

// restore undoes a scale-up by hand (its revert conflicted): the target file gets the previous
// value back; a pinned env's Application loses the patch, so the env runs its pin's value again.
func (st site) restore(snap *gitrepo.Snapshot, t Target, previous int64) ([]byte, int, error) {
	if st.app == "" {
		out, _, line, err := st.set(snap, t, previous)
		return out, line, err
	}
	return removeAppPatch(snap.Files[st.app], st.app, t)
}

func pathEnv(appFile string) string { return path.Base(path.Dir(appFile)) }

// applicationDoc returns the document holding the Application whose source is overlays/<env>,
// nil when none.
func applicationDoc(docs []doc, env string) *doc {
	for i, d := range docs {
		rn := d.rn
		if rn.IsNilOrEmpty() || rn.YNode().Kind != kyaml.MappingNode || rn.GetKind() != "Application" {
			continue
		}
		if p, err := rn.Pipe(kyaml.Lookup("spec", "source", "path")); err == nil && p != nil && path.Clean(p.YNode().Value) == render.OverlayPath(env) {
			return &docs[i]
		}
	}
	return nil
}

// appPatch returns the patch of t's field in the Application of overlays/<env> of an apps/<env>
// file: its node and value, ok false when it has none.
func appPatch(file string, data []byte, t Target) (it *kyaml.RNode, v int64, ok bool, err error) {
	docs, err := parseDocs(file, data)
	if err != nil {
		return nil, 0, false, err
	}
	if d := applicationDoc(docs, pathEnv(file)); d != nil {
		it, v, ok = findPatch(d.rn, t)
	}
	return it, v, ok, nil
}

// fieldPointer is the JSON pointer of a dotted field (spec.minReplicaCount → /spec/minReplicaCount).
func fieldPointer(field string) string { return "/" + strings.ReplaceAll(field, ".", "/") }

// patchOp is one JSON 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value int64  `json:"value"`
}

// findPatch finds the Application's patch that replaces t's field; its node and value.
func findPatch(app *kyaml.RNode, t Target) (*kyaml.RNode, int64, bool) {
	list, err := app.Pipe(kyaml.Lookup("spec", "source", "kustomize", "patches"))
	if err != nil || list == nil {
		return nil, 0, false
	}
	items, _ := list.Elements()
	for _, it := range items {
		kind, _ := it.Pipe(kyaml.Lookup("target", "kind"))
		name, _ := it.Pipe(kyaml.Lookup("target", "name"))
		if kind == nil || name == nil || kind.YNode().Value != t.Kind || name.YNode().Value != t.Name {
			continue
		}
		if ns, _ := it.Pipe(kyaml.Lookup("target", "namespace")); t.Namespace != "" && (ns == nil || ns.YNode().Value != t.Namespace) {
			continue
		}
		body, _ := it.Pipe(kyaml.Lookup("patch"))
		if body == nil {
			continue
		}
		var ops []patchOp
		if err := kyaml.Unmarshal([]byte(body.YNode().Value), &ops); err != nil || len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != fieldPointer(t.Field) {
			continue
		}
		return it, ops[0].Value, true
	}
	return nil, 0, false
}

// appDocument parses the file holding a pinned env's Application and returns the Application's
// document.
func appDocument(data []byte, file string) (*doc, error) {
	docs, err := parseDocs(file, data)
	if err != nil {
		return nil, err
	}
	d := applicationDoc(docs, pathEnv(file))
	if d == nil {
		return nil, fmt.Errorf("%s: no Application of overlays/%s", file, pathEnv(file))
	}
	return d, nil
}

// setAppPatch returns the Application file with a patch replacing t's field by value: the
// existing patch of that field rewritten on its line, or a new one appended to
// spec.source.kustomize.patches (created when missing). The edit is made on the text: every
// other line of the file, comments and layout included, stays as it is, and a revert of the
// commit removes exactly the lines it added.
func setAppPatch(data []byte, file string, t Target, value int64) ([]byte, int, error) {
	d, err := appDocument(data, file)
	if err != nil {
		return nil, 0, err
	}
	rn := d.rn
	ops, err := json.Marshal([]patchOp{{Op: "replace", Path: fieldPointer(t.Field), Value: value}})
	if err != nil {
		return nil, 0, err
	}
	body := "'" + string(ops) + "'"
	lines := strings.SplitAfter(string(data), "\n")
	if it, _, ok := findPatch(rn, t); ok {
		key, val := mapEntry(it.YNode(), "patch")
		if val.Line != key.Line || strings.Contains(val.Value, "\n") || val.Style&(kyaml.LiteralStyle|kyaml.FoldedStyle) != 0 {
			return nil, 0, fmt.Errorf("%s:%d: the patch of %s/%s %s spans lines: edit it by hand", file, key.Line, t.Kind, t.Name, t.Field)
		}
		lines[key.Line-1] = strings.Repeat(" ", key.Column-1) + "patch: " + body + "\n"
	} else {
		target := "{kind: " + t.Kind + ", name: " + t.Name
		if t.Namespace != "" {
			target += ", namespace: " + t.Namespace
		}
		entry := []string{"- target: " + target + "}", "  patch: " + body}
		at, indent, wrap, err := patchesInsertion(rn.YNode(), lines, d.end)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", file, err)
		}
		var add []string
		for j, w := range wrap {
			add = append(add, strings.Repeat(" ", indent+2*j)+w+"\n")
		}
		for _, e := range entry {
			add = append(add, strings.Repeat(" ", indent+2*len(wrap))+e+"\n")
		}
		lines = append(lines[:at], append(add, lines[at:]...)...)
	}
	out := []byte(strings.Join(lines, ""))
	// Check the result, and find its line.
	it, v, ok, err := appPatch(file, out, t)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: the edit does not parse: %w", file, err)
	}
	if !ok || v != value {
		return nil, 0, fmt.Errorf("%s: the patch of %s did not take", file, t.Field)
	}
	return out, it.YNode().Line, nil
}

// mapEntry returns the key and value nodes of a mapping's key; nil when absent.
func mapEntry(m *kyaml.Node, key string) (k, v *kyaml.Node) {
	if m == nil || m.Kind != kyaml.MappingNode {
		return nil, nil
	}
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key {
			return m.Content[j], m.Content[j+1]
		}
	}
	return nil, nil
}

// patchesInsertion finds where a new patch goes in the Application document (doc, ending at line
// end of the file's lines): the 0-based line to insert before, the indentation, and the keys to
// open first (kustomize:, patches:) when they are missing.
func patchesInsertion(doc *kyaml.Node, lines []string, end int) (at, indent int, wrap []string, err error) {
	_, spec := mapEntry(doc, "spec")
	_, source := mapEntry(spec, "source")
	if source == nil || source.Kind != kyaml.MappingNode || len(source.Content) == 0 {
		return 0, 0, nil, fmt.Errorf("the Application has no spec.source mapping")
	}
	// The chain of mappings from the document down to the deepest one that exists.
	chain := []*kyaml.Node{doc, spec, source}
	wrap = []string{"kustomize:", "patches:"}
	indent = source.Content[0].Column - 1
	if _, k := mapEntry(source, "kustomize"); k != nil {
		if k.Kind != kyaml.MappingNode || len(k.Content) == 0 {
			return 0, 0, nil, fmt.Errorf("spec.source.kustomize is not a block mapping: edit it by hand")
		}
		chain = append(chain, k)
		wrap, indent = wrap[1:], k.Content[0].Column-1
		if pk, pl := mapEntry(k, "patches"); pl != nil {
			if pl.Kind != kyaml.SequenceNode || pl.Style&kyaml.FlowStyle != 0 {
				return 0, 0, nil, fmt.Errorf("spec.source.kustomize.patches is not a block sequence: edit it by hand")
			}
			chain = append(chain, pl)
			wrap, indent = nil, pk.Column-1
			if len(pl.Content) > 0 {
				indent = pl.Content[0].Column - 3 // "- " before the item's first key
			}
		}
	}
	// Insert after the last line of the deepest node: before the next key of the nearest
	// enclosing mapping that has one (less the comments above it), else at the document's end.
	at = end
	for j := len(chain) - 1; j >= 1; j-- {
		parent := chain[j-1]
		for c := 0; c+1 < len(parent.Content); c += 2 {
			if parent.Content[c+1] == chain[j] && c+2 < len(parent.Content) {
				at = parent.Content[c+2].Line - 1
				j = 0
				break
			}
		}
	}
	for at > 0 {
		l := strings.TrimSpace(lines[at-1])
		if l != "" && !strings.HasPrefix(l, "#") {
			break
		}
		at--
	}
	return at, indent, wrap, nil
}

// removeAppPatch returns the Application file without the patch of t's field, and without the
// kustomize: and patches: keys when nothing else is left under them: the env then runs the
// pinned overlay's value. It is the scale-down of a pinned env when the revert of its scale-up
// conflicts (another peak's patch was appended next to it).
func removeAppPatch(data []byte, file string, t Target) ([]byte, int, error) {
	d, err := appDocument(data, file)
	if err != nil {
		return nil, 0, err
	}
	rn := d.rn
	it, _, ok := findPatch(rn, t)
	if !ok {
		return data, 0, nil
	}
	_, spec := mapEntry(rn.YNode(), "spec")
	_, source := mapEntry(spec, "source")
	kk, k := mapEntry(source, "kustomize")
	pk, list := mapEntry(k, "patches")
	lines := strings.SplitAfter(string(data), "\n")
	// The item runs from its first line to the next item's (or the end of the mapping that holds
	// the list).
	from := it.YNode().Line - 1
	to := -1
	for j, item := range list.Content {
		if item == it.YNode() && j+1 < len(list.Content) {
			to = list.Content[j+1].Line - 1
		}
	}
	only := len(list.Content) == 1
	if to < 0 || only {
		end, _, _, err := patchesInsertion(rn.YNode(), lines, d.end)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", file, err)
		}
		to = end
	}
	switch {
	case only && len(k.Content) == 2: // kustomize: holds nothing else
		from = kk.Line - 1
	case only:
		from = pk.Line - 1
	}
	line := from + 1
	lines = append(lines[:from], lines[to:]...)
	out := []byte(strings.Join(lines, ""))
	if _, _, still, err := appPatch(file, out, t); err != nil {
		return nil, 0, fmt.Errorf("%s: the removal does not parse: %w", file, err)
	} else if still {
		return nil, 0, fmt.Errorf("%s: the patch of %s is still there", file, t.Field)
	}
	return out, line, nil
}
