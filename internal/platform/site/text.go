package site

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// text is a one-document YAML file edited as lines at the positions its parse reports, so that
// comments, order and quoting stay as they are. Each edit parses the text again.
type text struct {
	name    string
	lines   []string
	finalNL bool
	root    *yaml.Node // the top-level mapping
}

func parseText(name string, data []byte) (*text, error) {
	t := &text{name: name}
	return t, t.set(string(data))
}

func (t *text) set(s string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a mapping", t.name)
	}
	t.root = doc.Content[0]
	t.finalNL = strings.HasSuffix(s, "\n")
	t.lines = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return nil
}

func (t *text) bytes() []byte {
	s := strings.Join(t.lines, "\n")
	if t.finalNL {
		s += "\n"
	}
	return []byte(s)
}

func (t *text) reparse() error { return t.set(string(t.bytes())) }

// lookup returns the value node at the path of mapping keys; nil when there is none.
func (t *text) lookup(keys ...string) *yaml.Node {
	n := t.root
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// setMapValue sets key of the block mapping at parent to value: the value's token is replaced
// where the key is, or a line is added after the mapping's last entry.
func (t *text) setMapValue(parent []string, key, value string) error {
	m := t.lookup(parent...)
	if m == nil || m.Kind != yaml.MappingNode || m.Style&yaml.FlowStyle != 0 || len(m.Content) == 0 {
		return fmt.Errorf("%s is not a block mapping with entries", strings.Join(parent, "."))
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return t.replaceScalar(m.Content[i+1], value)
		}
	}
	last := m.Content[len(m.Content)-1]
	return t.insertLine(lastLine(last), m.Content[0].Column-1, key+": "+quote(value))
}

// deleteMapKey removes key's line from the block mapping at parent, when the key is there.
func (t *text) deleteMapKey(parent []string, key string) error {
	m := t.lookup(parent...)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value != key {
			continue
		}
		if m.Style&yaml.FlowStyle != 0 || v.Kind != yaml.ScalarNode || v.Line != k.Line {
			return fmt.Errorf("%s.%s: not a one-line entry of a block mapping", strings.Join(parent, "."), key)
		}
		t.lines = append(t.lines[:k.Line-1], t.lines[k.Line:]...)
		return t.reparse()
	}
	return nil
}

// replaceEqual replaces every scalar whose value is old with value, returning how many.
func (t *text) replaceEqual(old, value string) (int, error) {
	var found []*yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && n.Value == old {
			found = append(found, n)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(t.root)
	// Bottom up, so that the positions of the others hold.
	for i := len(found) - 1; i >= 0; i-- {
		if err := t.replaceScalar(found[i], value); err != nil {
			return 0, err
		}
	}
	return len(found), nil
}

// replaceScalar replaces the one-line scalar n's token with value, quoted as the old one was when
// it was quoted.
func (t *text) replaceScalar(n *yaml.Node, value string) error {
	if n.Kind != yaml.ScalarNode || n.Line < 1 || n.Line > len(t.lines) {
		return fmt.Errorf("line %d: not a scalar", n.Line)
	}
	line := []rune(t.lines[n.Line-1])
	start := n.Column - 1
	if start >= len(line) && n.Value == "" { // an empty value: "key:" ends the line
		t.lines[n.Line-1] = strings.TrimRight(string(line), " ") + " " + quote(value)
		return nil
	}
	if start < 0 || start >= len(line) {
		return fmt.Errorf("line %d: column %d out of the line", n.Line, n.Column)
	}
	end, err := tokenEnd(line, start)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	var tok string
	switch line[start] {
	case '"':
		tok = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value) + `"`
	case '\'':
		tok = "'" + strings.ReplaceAll(value, "'", "''") + "'"
	default:
		tok = quote(value)
	}
	t.lines[n.Line-1] = string(line[:start]) + tok + string(line[end:])
	return t.reparse()
}

// insertLine adds "<indent spaces>content" after the 1-based line after.
func (t *text) insertLine(after, indent int, content string) error {
	l := strings.Repeat(" ", indent) + content
	t.lines = append(t.lines[:after], append([]string{l}, t.lines[after:]...)...)
	return t.reparse()
}

// tokenEnd finds where the scalar token starting at start ends on its line.
func tokenEnd(line []rune, start int) (int, error) {
	switch line[start] {
	case '"':
		for i := start + 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
		return 0, fmt.Errorf("a quoted scalar runs past its line")
	case '\'':
		for i := start + 1; i < len(line); i++ {
			if line[i] == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			}
		}
		return 0, fmt.Errorf("a quoted scalar runs past its line")
	case '|', '>':
		return 0, fmt.Errorf("a block scalar cannot be set in place")
	}
	end := len(line)
	for i := start; i < len(line); i++ {
		if line[i] == '#' && i > start && (line[i-1] == ' ' || line[i-1] == '\t') {
			end = i
			break
		}
	}
	for end > start && (line[end-1] == ' ' || line[end-1] == '\t') {
		end--
	}
	return end, nil
}

// lastLine is the last line a node's value takes (for a scalar, its own).
func lastLine(n *yaml.Node) int {
	for len(n.Content) > 0 {
		n = n.Content[len(n.Content)-1]
	}
	return n.Line
}

// quote writes value as a one-line YAML scalar: plain when YAML reads it back as the same
// string, double-quoted otherwise.
func quote(value string) string {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("v: "+value), &n); err == nil && len(n.Content) == 1 {
		if v := n.Content[0].Content[1]; v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value == value && !strings.Contains(value, " #") {
			return value
		}
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value) + `"`
}
