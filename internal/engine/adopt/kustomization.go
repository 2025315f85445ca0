package adopt

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// kustomizationNames are the file names kustomize looks for in a directory, in its order.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustFile is a kustomization file edited as lines, so that comments, order and style stay as
// they are and the diff shows only the entries added or moved. Each edit re-parses the text
// for the positions of the next.
type kustFile struct {
	name    string
	lines   []string
	finalNL bool       // the file ends with a newline
	root    *yaml.Node // the top-level mapping; nil for an empty file
}

func parseKust(name string, data []byte) (*kustFile, error) {
	k := &kustFile{name: name}
	return k, k.set(data)
}

func (k *kustFile) set(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", k.name, err)
	}
	k.root = nil
	if len(doc.Content) > 0 {
		if doc.Content[0].Kind != yaml.MappingNode {
			return fmt.Errorf("%s: not a mapping", k.name)
		}
		k.root = doc.Content[0]
	}
	s := string(data)
	k.finalNL = s == "" || strings.HasSuffix(s, "\n")
	k.lines = splitLines(s)
	return nil
}

func (k *kustFile) bytes() []byte {
	s := strings.Join(k.lines, "\n")
	if k.finalNL && len(k.lines) > 0 {
		s += "\n"
	}
	return []byte(s)
}

// splice replaces lines [from, to) (0-based) with repl and re-parses.
func (k *kustFile) splice(from, to int, repl ...string) error {
	lines := append(append(append([]string(nil), k.lines[:from]...), repl...), k.lines[to:]...)
	s := strings.Join(lines, "\n")
	if k.finalNL || to == len(k.lines) { // lines added at the end end with a newline
		s += "\n"
	}
	return k.set([]byte(s))
}

// key returns the value node of a top-level key and the 0-based lines [start, end) it spans:
// from the key's line to the last line before the next key that is neither blank nor a comment
// in the first column (those belong to what follows).
func (k *kustFile) key(name string) (v *yaml.Node, start, end int) {
	if k.root == nil {
		return nil, 0, 0
	}
	c := k.root.Content
	for i := 0; i+1 < len(c); i += 2 {
		if c[i].Value != name {
			continue
		}
		start, end = c[i].Line-1, len(k.lines)
		if i+2 < len(c) {
			end = c[i+2].Line - 1
		}
		for end > start+1 {
			l := k.lines[end-1]
			if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
				break
			}
			end--
		}
		return c[i+1], start, end
	}
	return nil, 0, 0
}

// listedIn says which list names the patch file: "patches" ({path: name}), "patchesStrategicMerge"
// or "transformers" (an inline PatchTransformer with path: name), with the item's index; "" when
// none does.
func (k *kustFile) listedIn(name string) (list string, index int) {
	for _, key := range []string{"patches", "patchesStrategicMerge", "transformers"} {
		v, _, _ := k.key(key)
		if v == nil || v.Kind != yaml.SequenceNode {
			continue
		}
		for i, it := range v.Content {
			var entry struct {
				Path string `yaml:"path"`
			}
			switch {
			case it.Kind == yaml.ScalarNode && key == "transformers":
				if yaml.Unmarshal([]byte(it.Value), &entry) != nil {
					continue
				}
			case it.Kind == yaml.ScalarNode:
				entry.Path = it.Value
			case it.Kind == yaml.MappingNode:
				if it.Decode(&entry) != nil {
					continue
				}
			}
			if entry.Path == name {
				return key, i
			}
		}
	}
	return "", -1
}

// appendItem adds an item at the end of the top-level list key, creating the list when there is
// none. item holds the item's lines: the first follows "- ", the others are indented relative to
// it. A flow-style list ([a, b]) is first rewritten as a block list.
func (k *kustFile) appendItem(key string, item []string) error {
	v, start, end := k.key(key)
	indent := "  "
	at := end
	switch {
	case v == nil:
		at = len(k.lines)
		if err := k.splice(at, at, key+":"); err != nil {
			return err
		}
		at++
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null" || v.Kind == yaml.SequenceNode && len(v.Content) == 0:
		if v.Value != "" || v.Kind == yaml.SequenceNode { // "key: ~", "key: null", "key: []"
			if err := k.splice(start, end, key+":"); err != nil {
				return err
			}
		}
		at = start + 1
	case v.Kind == yaml.SequenceNode && v.Style&yaml.FlowStyle != 0:
		if err := k.toBlock(key); err != nil {
			return err
		}
		return k.appendItem(key, item)
	case v.Kind == yaml.SequenceNode:
		indent = strings.Repeat(" ", max(v.Column-1, 0))
	default:
		return fmt.Errorf("%s: %s: is not a list", k.name, key)
	}
	lines := []string{indent + "- " + item[0]}
	for _, l := range item[1:] {
		lines = append(lines, indent+"  "+l)
	}
	return k.splice(at, at, lines...)
}

// removeItem drops item i of the top-level list key (comments before the next item stay).
func (k *kustFile) removeItem(key string, i int) error {
	v, _, end := k.key(key)
	if v == nil || v.Kind != yaml.SequenceNode || i >= len(v.Content) {
		return fmt.Errorf("%s: %s: no item %d", k.name, key, i)
	}
	if v.Style&yaml.FlowStyle != 0 {
		if err := k.toBlock(key); err != nil {
			return err
		}
		return k.removeItem(key, i)
	}
	dash := v.Column - 1
	itemStart := func(n *yaml.Node) int { // the line of the item's "-"
		l := n.Line - 1
		for l > 0 && !(len(k.lines[l]) > dash && k.lines[l][dash] == '-') {
			l--
		}
		return l
	}
	from, to := itemStart(v.Content[i]), end
	if i+1 < len(v.Content) {
		to = itemStart(v.Content[i+1])
		for to > from+1 {
			if t := strings.TrimSpace(k.lines[to-1]); t != "" && !strings.HasPrefix(t, "#") {
				break
			}
			to--
		}
	}
	return k.splice(from, to)
}

// toBlock rewrites a flow-style list (patches: [a, {path: b}]) as a block list, its items kept as
// they are written.
func (k *kustFile) toBlock(key string) error {
	v, start, end := k.key(key)
	v.Style &^= yaml.FlowStyle
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	err := enc.Encode(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: key}, v}})
	if err == nil {
		err = enc.Close()
	}
	if err != nil {
		return fmt.Errorf("%s: rewrite %s: %w", k.name, key, err)
	}
	return k.splice(start, end, splitLines(b.String())...)
}

// kustTransforms are the fields of a kustomization whose transformers kustomize runs after the
// patches: of the same kustomization, and so could set an adopted field back.
type kustTransforms struct {
	Namespace         string            `json:"namespace"`
	NamePrefix        string            `json:"namePrefix"`
	NameSuffix        string            `json:"nameSuffix"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	Labels            []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Images []struct {
		Name string `json:"name"`
	} `json:"images"`
	Replicas []struct {
		Name string `json:"name"`
	} `json:"replicas"`
	Replacements    []any `json:"replacements"`
	PatchesJSON6902 []any `json:"patchesJson6902"`
}

// overriddenBy names the transformer of k that runs after patches: and would change a field of
// the patch doc, "" when none would: then the patch can be listed under patches:; otherwise it
// goes under transformers:, which kustomize runs after all of them.
func (k *kustFile) overriddenBy(doc map[string]any) string {
	var t kustTransforms
	if err := sigsyaml.Unmarshal(k.bytes(), &t); err != nil {
		return "an unreadable transformer" // be safe: last
	}
	switch {
	case t.Namespace != "" || t.NamePrefix != "" || t.NameSuffix != "":
		return "namespace:/namePrefix:/nameSuffix: (the patch names the object as it is live)"
	case len(t.Replacements) > 0:
		return "replacements:"
	case len(t.PatchesJSON6902) > 0:
		return "patchesJson6902:"
	}
	labels := map[string]bool{}
	for l := range t.CommonLabels {
		labels[l] = true
	}
	for _, ls := range t.Labels {
		for l := range ls.Pairs {
			labels[l] = true
		}
	}
	images := map[string]bool{}
	for _, im := range t.Images {
		images[im.Name] = true
	}
	if name, _, _ := nested(doc, "metadata", "name"); name != nil {
		for _, r := range t.Replicas {
			if _, ok, _ := nested(doc, "spec", "replicas"); ok && r.Name == name {
				return "replicas: " + r.Name
			}
		}
	}
	var found string
	walk(doc, "", func(key string, v any) {
		switch key {
		case "image":
			if s, ok := v.(string); ok && images[imageName(s)] {
				found = "images: " + imageName(s)
			}
		case "labels", "matchLabels", "annotations":
			m, ok := v.(map[string]any)
			if !ok {
				return
			}
			for l := range m {
				switch {
				case key == "annotations" && t.CommonAnnotations != nil:
					if _, ok := t.CommonAnnotations[l]; ok {
						found = "commonAnnotations: " + l
					}
				case key != "annotations" && labels[l]:
					found = "labels: " + l
				}
			}
		}
	})
	return found
}

// walk calls fn with every map entry below v and the key it is under.
func walk(v any, key string, fn func(key string, v any)) {
	fn(key, v)
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			walk(c, k, fn)
		}
	case []any:
		for _, c := range x {
			walk(c, "", fn)
		}
	}
}

// nested returns the value at a path of map keys.
func nested(m map[string]any, keys ...string) (any, bool, error) {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("not a map")
		}
		if v, ok = mm[k]; !ok {
			return nil, false, nil
		}
	}
	return v, true, nil
}

// imageName is an image reference without its tag and digest, as kustomize's images: match it.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
