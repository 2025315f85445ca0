package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// location is where a target field is in a file.
type location struct {
	line    int // 1-based line in the file of the value
	value   int64
	max     int64 // the object's maximum (maxReplicaCount / maxReplicas), 0 when unknown
	maxLine int
}

// doc is one YAML document of a file: its root (nil when empty) and the lines it spans (1-based,
// inclusive).
type doc struct {
	rn         *kyaml.RNode
	start, end int
}

// parseDocs decodes every document of a multi-document file with the YAML library's stream
// decoder rather than splitting the text: the document boundaries are the library's (a
// document node starts at its "---" line), and node lines and columns are positions in the
// whole file, so an edit changes the file's bytes where the library points and leaves every
// other byte alone (a kio round trip would re-indent and re-quote the user's file).
func parseDocs(file string, data []byte) ([]doc, error) {
	dec := kyaml.NewDecoder(bytes.NewReader(data))
	var docs []doc
	for {
		var n kyaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: parse: %w", file, err)
		}
		d := doc{start: 1} // what precedes the first document (comments) belongs to it
		if len(docs) > 0 {
			d.start = n.Line
			docs[len(docs)-1].end = n.Line - 1
		}
		if len(n.Content) == 1 {
			d.rn = kyaml.NewRNode(n.Content[0])
		}
		docs = append(docs, d)
	}
	if len(docs) > 0 {
		docs[len(docs)-1].end = len(strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n"))
	}
	return docs, nil
}

// maxField is the field holding the maximum for a min field.
func maxField(field string) string {
	switch {
	case strings.HasSuffix(field, "minReplicaCount"):
		return strings.TrimSuffix(field, "minReplicaCount") + "maxReplicaCount"
	case strings.HasSuffix(field, "minReplicas"):
		return strings.TrimSuffix(field, "minReplicas") + "maxReplicas"
	}
	return ""
}

// lookupError is a target that is not in the file; Key names the target key at fault
// (path, name or field) so the schedule error can point at its line.
type lookupError struct {
	Key string
	Msg string
}

func (e *lookupError) Error() string { return e.Msg }

// find parses data and returns the document holding the target object.
func find(data []byte, t Target) (*kyaml.RNode, error) {
	docs, err := parseDocs(t.Path, data)
	if err != nil {
		return nil, err
	}
	var found *kyaml.RNode
	for _, d := range docs {
		rn := d.rn
		if rn.IsNilOrEmpty() || rn.YNode().Kind != kyaml.MappingNode {
			continue
		}
		if rn.GetKind() != t.Kind || rn.GetName() != t.Name || (t.Namespace != "" && rn.GetNamespace() != t.Namespace) {
			continue
		}
		if found != nil {
			return nil, &lookupError{"name", fmt.Sprintf("%s: %s/%s is defined twice (lines %d and %d): set target.namespace",
				t.Path, t.Kind, t.Name, found.YNode().Line, rn.YNode().Line)}
		}
		found = rn
	}
	if found == nil {
		return nil, &lookupError{"name", fmt.Sprintf("%s: no %s named %s", t.Path, t.Kind, t.Name)}
	}
	return found, nil
}

// intField looks up a dotted integer field of rn; nil node when absent.
func intField(rn *kyaml.RNode, field string) (*kyaml.RNode, int64, error) {
	n, err := rn.Pipe(kyaml.Lookup(strings.Split(field, ".")...))
	if err != nil || n == nil {
		return nil, 0, err
	}
	y := n.YNode()
	if y.Kind != kyaml.ScalarNode || y.Tag != "!!int" {
		return nil, 0, fmt.Errorf("%s is %q, not an integer", field, y.Value)
	}
	v, err := strconv.ParseInt(y.Value, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%s is %q, not an integer", field, y.Value)
	}
	return n, v, nil
}

// lookup finds the target field in data.
func lookup(data []byte, t Target) (location, error) {
	rn, err := find(data, t)
	if err != nil {
		return location{}, err
	}
	n, v, err := intField(rn, t.Field)
	if err != nil {
		return location{}, &lookupError{"field", fmt.Sprintf("%s %s/%s: %v", t.Path, t.Kind, t.Name, err)}
	}
	if n == nil {
		return location{}, &lookupError{"field", fmt.Sprintf("%s: %s/%s has no field %s", t.Path, t.Kind, t.Name, t.Field)}
	}
	loc := location{line: n.YNode().Line, value: v}
	if mf := maxField(t.Field); mf != "" {
		if mn, mv, err := intField(rn, mf); err == nil && mn != nil {
			loc.max, loc.maxLine = mv, mn.YNode().Line
		}
	}
	return loc, nil
}

// setField returns data with the target field set to value, touching only the value's bytes:
// comments, order, quoting and indentation of everything else are kept. It also returns the
// previous value and the changed line.
func setField(data []byte, t Target, value int64) (out []byte, from int64, line int, err error) {
	rn, err := find(data, t)
	if err != nil {
		return nil, 0, 0, err
	}
	n, from, err := intField(rn, t.Field)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s %s/%s: %w", t.Path, t.Kind, t.Name, err)
	}
	if n == nil {
		return nil, 0, 0, fmt.Errorf("%s: %s/%s has no field %s", t.Path, t.Kind, t.Name, t.Field)
	}
	y := n.YNode()
	if from == value {
		return data, from, y.Line, nil
	}
	text, err := replaceToken(string(data), y.Line, y.Column, y.Value, strconv.FormatInt(value, 10))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s:%d: %w", t.Path, y.Line, err)
	}
	out = []byte(text)
	// Check the result.
	chk, err := lookup(out, t)
	if err != nil || chk.value != value {
		return nil, 0, 0, fmt.Errorf("%s: edit of %s did not take (%v)", t.Path, t.Field, err)
	}
	return out, from, y.Line, nil
}

// replaceToken replaces old at (line, col) (1-based, col in characters) by repl.
func replaceToken(text string, line, col int, old, repl string) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	if line < 1 || line > len(lines) {
		return "", fmt.Errorf("line %d out of range", line)
	}
	r := []rune(lines[line-1])
	if col < 1 || col-1+len([]rune(old)) > len(r) || string(r[col-1:col-1+len([]rune(old))]) != old {
		return "", fmt.Errorf("value %q not found at column %d", old, col)
	}
	lines[line-1] = string(r[:col-1]) + repl + string(r[col-1+len([]rune(old)):])
	return strings.Join(lines, ""), nil
}

// CurrentValue returns the target field's value in files (a snapshot's files).
func CurrentValue(files map[string][]byte, t Target) (int64, error) {
	data, ok := files[t.Path]
	if !ok {
		return 0, &lookupError{"path", fmt.Sprintf("%s not found", t.Path)}
	}
	loc, err := lookup(data, t)
	return loc.value, err
}
