package adopt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// yamlEdit is a YAML file (one or more documents) edited as text: a scalar is replaced where it
// is written, a value spanning lines replaced by its lines, a missing key added as lines at the
// end of its mapping, so that comments, order and style stay and a diff shows only what changed.
// Each edit is checked by reading the result back; one the text edit cannot make (a flow
// collection, an alias) is made by encoding the file again with yaml.v3, which keeps comments.
type yamlEdit struct {
	name string
	data []byte
}

// step is one step of a path in a YAML document: a mapping key (string) or a sequence index (int).
type step = any

// yamlDocs reads every document of data as nodes.
func yamlDocs(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &n)
	}
}

// yamlValues reads every document of data as plain values (maps, lists, scalars), numbers as
// float64 as JSON reads them: two files saying the same thing read the same.
func yamlValues(data []byte) ([]any, error) {
	docs, err := yamlDocs(data)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(docs))
	for i, d := range docs {
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		out[i] = normal(v)
	}
	return out, nil
}

// normal is v as JSON reads it back (drift.AsJSON).
func normal(v any) any { return drift.AsJSON(v) }

// set writes value at path in document doc, creating the mappings the path names that are not
// there.
func (e *yamlEdit) set(doc int, path []step, value any) error {
	// A file of CRLF lines is edited as LF lines and given its CRLFs back, inserted lines too.
	if n := bytes.Count(e.data, []byte("\r\n")); n > 0 && n == bytes.Count(e.data, []byte("\n")) {
		lf := &yamlEdit{name: e.name, data: bytes.ReplaceAll(e.data, []byte("\r\n"), []byte("\n"))}
		if err := lf.set(doc, path, value); err != nil {
			return err
		}
		e.data = bytes.ReplaceAll(lf.data, []byte("\n"), []byte("\r\n"))
		return nil
	}
	want, err := yamlValues(e.data)
	if err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	if doc >= len(want) {
		return fmt.Errorf("%s: no document %d", e.name, doc+1)
	}
	if want[doc], err = setPath(want[doc], path, normal(value)); err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	// A JSON file stays JSON: a text edit that leaves it JSON, else the file encoded again as
	// JSON with its own indentation, and either read back with encoding/json.
	isJSON := strings.HasSuffix(e.name, ".json")
	if out, err := e.textSet(doc, path, value); err == nil && sameValues(out, want) && (!isJSON || json.Valid(out)) {
		e.data = out
		return nil
	}
	out, err := e.encodeSet(doc, path, value)
	if err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	if !sameValues(out, want) {
		return fmt.Errorf("%s: the edit does not read back as written", e.name)
	}
	if isJSON && !json.Valid(out) {
		return fmt.Errorf("%s: the edit is not JSON", e.name)
	}
	e.data = out
	return nil
}

func sameValues(data []byte, want []any) bool {
	got, err := yamlValues(data)
	return err == nil && reflect.DeepEqual(got, want)
}

// setPath sets path in v (a plain value) to value, creating maps.
func setPath(v any, path []step, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	switch s := path[0].(type) {
	case string:
		m, ok := v.(map[string]any)
		if v == nil {
			m, ok = map[string]any{}, true
		}
		if !ok {
			return nil, fmt.Errorf("%s: not a mapping", s)
		}
		var err error
		m[s], err = setPath(m[s], path[1:], value)
		return m, err
	case int:
		l, ok := v.([]any)
		if !ok || s >= len(l) {
			return nil, fmt.Errorf("no item %d", s)
		}
		var err error
		l[s], err = setPath(l[s], path[1:], value)
		return l, err
	}
	return nil, fmt.Errorf("bad path step %v", path[0])
}

// nest is value under the keys of path: {a: {b: value}} for [a b].
func nest(path []step, value any) any {
	for i := len(path) - 1; i >= 0; i-- {
		value = map[string]any{path[i].(string): value}
	}
	return value
}

// textSet makes the edit on the text.
func (e *yamlEdit) textSet(doc int, path []step, value any) ([]byte, error) {
	docs, err := yamlDocs(e.data)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(e.data), "\n")
	if len(docs[doc].Content) == 0 {
		return nil, fmt.Errorf("empty document")
	}
	cur := docs[doc].Content[0]
	for i, s := range path {
		last := i == len(path)-1
		switch s := s.(type) {
		case string:
			if cur.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("not a mapping")
			}
			var k, v *yaml.Node
			for j := 0; j+1 < len(cur.Content); j += 2 {
				if cur.Content[j].Value == s {
					k, v = cur.Content[j], cur.Content[j+1]
				}
			}
			switch {
			case k == nil:
				return insertKey(lines, cur, s, nest(path[i+1:], value))
			case last:
				return replaceValue(lines, k, v, value, cur.Style&yaml.FlowStyle != 0)
			case isEmpty(v):
				return replaceValue(lines, k, v, nest(path[i+1:], value), cur.Style&yaml.FlowStyle != 0)
			}
			cur = v
		case int:
			if cur.Kind != yaml.SequenceNode || s >= len(cur.Content) {
				return nil, fmt.Errorf("no item %d", s)
			}
			if last {
				return replaceScalar(lines, cur.Content[s], value, cur.Style&yaml.FlowStyle != 0)
			}
			cur = cur.Content[s]
		}
	}
	return nil, fmt.Errorf("empty path")
}

// isEmpty says whether a node says nothing: null, or an empty flow mapping.
func isEmpty(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" || n.Kind == yaml.MappingNode && len(n.Content) == 0
}

// replaceValue writes value as the value of key k (whose value node is v).
func replaceValue(lines []string, k, v *yaml.Node, value any, inFlow bool) ([]byte, error) {
	_, composite := value.(map[string]any)
	if _, ok := value.([]any); ok {
		composite = true
	}
	multiline := false
	if s, ok := value.(string); ok && strings.Contains(s, "\n") {
		multiline = true
	}
	if v.Kind == yaml.ScalarNode && v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 && !composite && !multiline && v.Line == k.Line {
		return replaceScalar(lines, v, value, inFlow)
	}
	if inFlow || v.Style&yaml.FlowStyle != 0 && !isEmpty(v) {
		return nil, fmt.Errorf("flow style")
	}
	// The key's lines, from its own to the last of its value, become key: and the value's block.
	start := k.Line - 1
	col := k.Column - 1
	atCol := ""
	if v.Kind == yaml.SequenceNode {
		atCol = "items"
	}
	end := blockEnd(lines, start+1, col, atCol)
	head := lines[start]
	keyEnd := strings.Index(head[byteCol(head, col):], ":")
	if keyEnd < 0 {
		return nil, fmt.Errorf("key %s: no colon", k.Value)
	}
	keyText := head[:byteCol(head, col)+keyEnd+1]
	if s, ok := value.(string); ok && multiline && v.Kind == yaml.ScalarNode && v.Style&yaml.LiteralStyle != 0 {
		// A literal block stays one, with its indicator and indentation.
		rest := strings.TrimSpace(head[len(keyText):])
		indent := col + 2
		for _, l := range lines[start+1 : end] {
			if strings.TrimSpace(l) != "" {
				indent = len(l) - len(strings.TrimLeft(l, " "))
				break
			}
		}
		out := []string{keyText + " " + rest + "\n"}
		for _, l := range strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n") {
			l = strings.TrimSuffix(l, "\n")
			if l == "" {
				out = append(out, "\n")
				continue
			}
			out = append(out, strings.Repeat(" ", indent)+l+"\n")
		}
		return join(lines[:start], out, lines[end:]), nil
	}
	block, err := valueLines(value, col)
	if err != nil {
		return nil, err
	}
	block[0] = keyText + block[0]
	return join(lines[:start], block, lines[end:]), nil
}

// valueLines is value as the text after "key:" and the lines below it, at indentation col+2.
func valueLines(value any, col int) ([]string, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(value); err != nil {
		return nil, err
	}
	text := b.String()
	_, m := value.(map[string]any)
	_, l := value.([]any)
	s, str := value.(string)
	if str && strings.Contains(s, "\n") || (m || l) && strings.TrimSpace(text) != "{}" && strings.TrimSpace(text) != "[]" {
		out := []string{""}
		if str {
			first, rest, _ := strings.Cut(text, "\n")
			out[0] = " " + first
			text = rest
		}
		out[0] += "\n"
		for _, line := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
			if strings.TrimSpace(line) == "" {
				out = append(out, "\n")
				continue
			}
			out = append(out, strings.Repeat(" ", col+2)+strings.TrimSuffix(line, "\n")+"\n")
		}
		return out, nil
	}
	return []string{" " + strings.TrimSpace(text) + "\n"}, nil
}

// insertKey adds key: value as the last entry of block mapping m.
func insertKey(lines []string, m *yaml.Node, key string, value any) ([]byte, error) {
	if m.Style&yaml.FlowStyle != 0 || len(m.Content) == 0 {
		return nil, fmt.Errorf("flow or empty mapping")
	}
	first := m.Content[0]
	col := first.Column - 1
	end := blockEnd(lines, first.Line, col, "all")
	keyText, err := scalarText(key, 0, false)
	if err != nil {
		return nil, err
	}
	block, err := valueLines(value, col)
	if err != nil {
		return nil, err
	}
	block[0] = strings.Repeat(" ", col) + keyText + ":" + block[0]
	if end > 0 && !strings.HasSuffix(lines[end-1], "\n") {
		lines[end-1] += "\n"
	}
	return join(lines[:end], block, lines[end:]), nil
}

// blockEnd is the line (0-based) after the block that starts above line from and holds the
// lines indented more than col, and those at col that atCol takes: "all" (the keys of a mapping
// at col), "items" (the "- " items of a sequence at its key's column) or none (""). Blank lines
// and comments not indented more than col at its end are left to what follows.
func blockEnd(lines []string, from, col int, atCol string) int {
	end := from
	for i := from; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r\n")
		t := strings.TrimLeft(l, " ")
		ind := len(l) - len(t)
		switch {
		case t == "":
		case strings.HasPrefix(l, "---") || strings.HasPrefix(l, "..."):
			return end
		case strings.HasPrefix(t, "#"):
			if ind > col {
				end = i + 1
			}
		case ind > col || ind == col && (atCol == "all" || atCol == "items" && strings.HasPrefix(t, "-")):
			end = i + 1
		default:
			return end
		}
	}
	return end
}

func join(parts ...[]string) []byte {
	var b strings.Builder
	for _, p := range parts {
		for _, l := range p {
			b.WriteString(l)
		}
	}
	return []byte(b.String())
}
