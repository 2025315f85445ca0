package adopt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// replaceScalar writes value over the scalar node n, in its quoting style.
func replaceScalar(lines []string, n *yaml.Node, value any, inFlow bool) ([]byte, error) {
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || n.Tag != "" && n.Style&yaml.TaggedStyle != 0 || n.Anchor != "" {
		return nil, fmt.Errorf("not a plain scalar")
	}
	line := lines[n.Line-1]
	nl := ""
	for _, end := range []string{"\r\n", "\n"} {
		if strings.HasSuffix(line, end) {
			line, nl = strings.TrimSuffix(line, end), end
			break
		}
	}
	start := byteCol(line, n.Column-1)
	end := scalarEnd(line, start, n.Style, inFlow)
	if end < 0 {
		return nil, fmt.Errorf("scalar spans lines")
	}
	text, err := scalarText(value, n.Style, inFlow)
	if err != nil {
		return nil, err
	}
	out := append([]string(nil), lines...)
	out[n.Line-1] = line[:start] + text + line[end:] + nl
	return []byte(strings.Join(out, "")), nil
}

// scalarEnd is where the scalar starting at line[start] ends, or -1 when it goes on below.
func scalarEnd(line string, start int, style yaml.Style, inFlow bool) int {
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return -1
	case style&yaml.SingleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			if line[i] == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				return i + 1
			}
		}
		return -1
	}
	end := len(line)
	if i := strings.Index(line[start:], " #"); i >= 0 {
		end = start + i
	}
	if inFlow {
		if i := strings.IndexAny(line[start:end], ",]}"); i >= 0 {
			end = start + i
		}
	}
	return start + len(strings.TrimRight(line[start:end], " \t"))
}

// scalarText is value written as one YAML scalar: a string in the given quoting style when it
// had one, else as yaml.v3 writes it (quoted when it would read as another type).
func scalarText(value any, style yaml.Style, inFlow bool) (string, error) {
	if s, ok := value.(string); ok && style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle)}
		data, err := yaml.Marshal(n)
		return strings.TrimSuffix(string(data), "\n"), err
	}
	if inFlow {
		data, err := json.Marshal(value) // JSON is flow YAML: commas and brackets quoted
		return string(data), err
	}
	data, err := yaml.Marshal(value)
	text := strings.TrimSuffix(string(data), "\n")
	if strings.Contains(text, "\n") {
		return "", fmt.Errorf("not one line")
	}
	return text, err
}

// byteCol is the byte offset of rune column col in line (yaml.v3 counts columns in runes).
func byteCol(line string, col int) int {
	off := 0
	for i := 0; i < col && off < len(line); i++ {
		_, size := utf8.DecodeRuneInString(line[off:])
		off += size
	}
	return off
}

// encodeSet makes the edit on the nodes and encodes the file again.
func (e *yamlEdit) encodeSet(doc int, path []step, value any) ([]byte, error) {
	docs, err := yamlDocs(e.data)
	if err != nil {
		return nil, err
	}
	var v yaml.Node
	if err := v.Encode(value); err != nil {
		return nil, err
	}
	if len(docs[doc].Content) == 0 {
		docs[doc].Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}
	}
	cur := docs[doc].Content[0]
	for i, s := range path {
		last := i == len(path)-1
		switch s := s.(type) {
		case string:
			if isEmpty(cur) {
				*cur = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			}
			if cur.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("not a mapping")
			}
			var next *yaml.Node
			for j := 0; j+1 < len(cur.Content); j += 2 {
				if cur.Content[j].Value == s {
					next = cur.Content[j+1]
				}
			}
			if next == nil {
				next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				cur.Content = append(cur.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}, next)
			}
			if last {
				*next = v
			}
			cur = next
		case int:
			if cur.Kind != yaml.SequenceNode || s >= len(cur.Content) {
				return nil, fmt.Errorf("no item %d", s)
			}
			if last {
				*cur.Content[s] = v
			}
			cur = cur.Content[s]
		}
	}
	if strings.HasSuffix(e.name, ".json") {
		if len(docs) != 1 {
			return nil, fmt.Errorf("not one JSON document")
		}
		var b bytes.Buffer
		if err := writeJSON(&b, docs[0], jsonIndent(e.data), 0); err != nil {
			return nil, err
		}
		if bytes.HasSuffix(e.data, []byte("\n")) {
			b.WriteString("\n")
		}
		return b.Bytes(), nil
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// jsonIndent is the indentation of a JSON file: that of its first indented line ("  " when none).
func jsonIndent(data []byte) string {
	for _, l := range strings.Split(string(data), "\n") {
		if t := strings.TrimLeft(l, " \t"); t != "" && len(t) < len(l) {
			return l[:len(l)-len(t)]
		}
	}
	return "  "
}

// writeJSON writes the YAML node n as JSON, keys in their order, one entry a line.
func writeJSON(b *bytes.Buffer, n *yaml.Node, indent string, depth int) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			b.WriteString("null")
			return nil
		}
		return writeJSON(b, n.Content[0], indent, depth)
	case yaml.AliasNode:
		return writeJSON(b, n.Alias, indent, depth)
	case yaml.MappingNode, yaml.SequenceNode:
		open, closing, step := "{", "}", 2
		if n.Kind == yaml.SequenceNode {
			open, closing, step = "[", "]", 1
		}
		if len(n.Content) == 0 {
			b.WriteString(open + closing)
			return nil
		}
		b.WriteString(open + "\n")
		for i := 0; i < len(n.Content); i += step {
			b.WriteString(strings.Repeat(indent, depth+1))
			if step == 2 {
				key, err := jsonScalar(n.Content[i].Value)
				if err != nil {
					return err
				}
				b.WriteString(key + ": ")
			}
			if err := writeJSON(b, n.Content[i+step-1], indent, depth+1); err != nil {
				return err
			}
			if i+step < len(n.Content) {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(strings.Repeat(indent, depth) + closing)
		return nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	text, err := jsonScalar(v)
	b.WriteString(text)
	return err
}

func jsonScalar(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
