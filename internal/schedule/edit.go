package schedule

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// location is where a target field is in a file.
type location struct {
	doc     int // index of the YAML document
	line    int // 1-based line in the file of the value
	value   int64
	max     int64 // the object's maximum (maxReplicaCount / maxReplicas), 0 when unknown
	maxLine int
}

var docSep = regexp.MustCompile(`^---(\s.*)?$`)

// document is one YAML document of a multi-document file, with its position.
type document struct {
	text      string
	firstLine int // 1-based line of the document's first line in the file
}

// splitDocs splits a file at `---` lines; the separators stay outside the documents. Joining
// the documents with the separators gives the file back byte for byte (see joinDocs).
func splitDocs(data []byte) (docs []document, seps []string) {
	lines := strings.SplitAfter(string(data), "\n")
	var cur strings.Builder
	first := 1
	for i, l := range lines {
		if docSep.MatchString(strings.TrimRight(l, "\r\n")) {
			docs = append(docs, document{cur.String(), first})
			seps = append(seps, l)
			cur.Reset()
			first = i + 2
			continue
		}
		cur.WriteString(l)
	}
	docs = append(docs, document{cur.String(), first})
	return docs, seps
}

func joinDocs(docs []document, seps []string) []byte {
	var b bytes.Buffer
	for i, d := range docs {
		b.WriteString(d.text)
		if i < len(seps) {
			b.WriteString(seps[i])
		}
	}
	return b.Bytes()
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

// find parses the documents with kyaml and returns the one holding the target object.
func find(docs []document, t Target) (int, *kyaml.RNode, error) {
	idx, found := -1, (*kyaml.RNode)(nil)
	for i, d := range docs {
		if strings.TrimSpace(d.text) == "" {
			continue
		}
		rn, err := kyaml.Parse(d.text)
		if err != nil {
			return 0, nil, fmt.Errorf("%s:%d: parse: %v", t.Path, d.firstLine, err)
		}
		if rn.IsNilOrEmpty() || rn.YNode().Kind != kyaml.MappingNode {
			continue
		}
		if rn.GetKind() != t.Kind || rn.GetName() != t.Name || (t.Namespace != "" && rn.GetNamespace() != t.Namespace) {
			continue
		}
		if found != nil {
			return 0, nil, &lookupError{"name", fmt.Sprintf("%s: %s/%s is defined twice (lines %d and %d): set target.namespace",
				t.Path, t.Kind, t.Name, docs[idx].firstLine, d.firstLine)}
		}
		idx, found = i, rn
	}
	if found == nil {
		return 0, nil, &lookupError{"name", fmt.Sprintf("%s: no %s named %s", t.Path, t.Kind, t.Name)}
	}
	return idx, found, nil
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
	docs, _ := splitDocs(data)
	i, rn, err := find(docs, t)
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
	loc := location{doc: i, line: docs[i].firstLine + n.YNode().Line - 1, value: v}
	if mf := maxField(t.Field); mf != "" {
		if mn, mv, err := intField(rn, mf); err == nil && mn != nil {
			loc.max, loc.maxLine = mv, docs[i].firstLine+mn.YNode().Line-1
		}
	}
	return loc, nil
}

// setField returns data with the target field set to value, touching only the field's line:
// comments, order, quoting and indentation of everything else are kept. It also returns the
// previous value and the changed line.
func setField(data []byte, t Target, value int64) (out []byte, from int64, line int, err error) {
	docs, seps := splitDocs(data)
	i, rn, err := find(docs, t)
	if err != nil {
		return nil, 0, 0, err
	}
	n, from, err := intField(rn, t.Field)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s %s/%s: %v", t.Path, t.Kind, t.Name, err)
	}
	if n == nil {
		return nil, 0, 0, fmt.Errorf("%s: %s/%s has no field %s", t.Path, t.Kind, t.Name, t.Field)
	}
	y := n.YNode()
	line = docs[i].firstLine + y.Line - 1
	if from == value {
		return data, from, line, nil
	}
	old, col := y.Value, y.Column
	// Edit in place so comments attached to the value node stay, and let kyaml serialise the
	// document.
	y.Value = strconv.FormatInt(value, 10)
	text, err := rn.String()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: serialise: %v", t.Path, err)
	}
	if onlyLineDiffers(docs[i].text, text, y.Line) {
		docs[i].text = text
	} else {
		// kyaml re-indented or re-quoted something else in the document: replace the value's
		// token on its line instead.
		if docs[i].text, err = replaceToken(docs[i].text, y.Line, col, old, y.Value); err != nil {
			return nil, 0, 0, fmt.Errorf("%s:%d: %v", t.Path, line, err)
		}
	}
	out = joinDocs(docs, seps)
	// Check the result.
	chk, err := lookup(out, t)
	if err != nil || chk.value != value {
		return nil, 0, 0, fmt.Errorf("%s: edit of %s did not take (%v)", t.Path, t.Field, err)
	}
	return out, from, line, nil
}

// onlyLineDiffers reports whether b equals a except on line (1-based).
func onlyLineDiffers(a, b string, line int) bool {
	la, lb := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	if len(la) != len(lb) {
		return false
	}
	for i := range la {
		if i != line-1 && la[i] != lb[i] {
			return false
		}
	}
	return true
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
