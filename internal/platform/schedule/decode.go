package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// Load reads clusters/<env>/schedule.yaml from a snapshot, parses it and checks the targets
// against the snapshot's files. Errors: ErrNoSchedule (wrapped) or ErrorList.
func Load(snap *gitrepo.Snapshot, env string) (*Schedule, error) {
	file := Path(env)
	data, ok := snap.Files[file]
	if !ok {
		return nil, fmt.Errorf("%w: %s at %s", ErrNoSchedule, file, gitrepo.Short(snap.Revision))
	}
	s, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	if err := s.CheckTargets(snap.Files); err != nil {
		return nil, err
	}
	return s, nil
}

// Parse parses a schedule file. file names it in errors; every error carries its line. Targets
// are not checked against a repository (see CheckTargets). The error is an ErrorList.
//
// The file is decoded by yaml.v3 into the types of schedule_yaml.go with unknown fields
// rejected (KnownFields), then validated (validate.go); both kinds of errors are reported
// together, in line order.
func Parse(file string, data []byte) (*Schedule, error) {
	doc, errs := decode(file, data)
	if doc == nil {
		return nil, errs
	}
	v := &validator{file: file, errs: errs}
	s := v.schedule(doc)
	if len(v.errs) > 0 {
		sort.SliceStable(v.errs, func(i, j int) bool { return v.errs[i].Line < v.errs[j].Line })
		return nil, v.errs
	}
	s.File = file
	return s, nil
}

// decode decodes the first YAML document of data strictly. It returns nil and the errors when
// the file is not YAML or is empty; otherwise the (partly) decoded file and its type errors.
func decode(file string, data []byte) (*at[fileYAML], ErrorList) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc at[fileYAML]
	err := dec.Decode(&doc)
	var te *yaml.TypeError
	switch {
	case errors.Is(err, io.EOF):
		return nil, ErrorList{{File: file, Msg: "empty schedule"}}
	case errors.As(err, &te):
		keys := keysByLine(data)
		var errs ErrorList
		dup := false
		for _, msg := range te.Errors {
			errs = append(errs, typeError(file, msg, keys))
			// yaml.v3 leaves a mapping with a duplicate key undecoded: validating it would only
			// add "missing" errors.
			dup = dup || strings.Contains(msg, "already defined at line")
		}
		if doc.Line == 0 || dup {
			return nil, errs
		}
		return &doc, errs
	case err != nil:
		line, msg := cutLine(strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, ErrorList{{File: file, Line: line, Msg: "invalid YAML: " + msg}}
	case doc.Line == 0:
		return nil, ErrorList{{File: file, Msg: "empty schedule"}}
	}
	return &doc, nil
}

// cutLine splits yaml.v3's "line N: message" into N and the message (0 and msg if it has no
// line).
func cutLine(msg string) (int, string) {
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, m, ok := strings.Cut(rest, ":"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				return v, strings.TrimSpace(m)
			}
		}
	}
	return 0, msg
}

// typeError turns one of yaml.v3's type errors into an Error, naming the schedule's keys and
// sections instead of Go types: "line 6: field duraton not found in type schedule.peakYAML"
// becomes `unknown field "duraton" in peak (known: name, recurrence, ...)`, "line 8: cannot
// unmarshal !!str `+"`four`"+` into int64" becomes `warm must be an integer, not "four"`. keys are the
// keys whose values start on each line (keysByLine).
func typeError(file, msg string, keys map[int][]keyAt) *Error {
	line, msg := cutLine(msg)
	var field, typ string
	if n, _ := fmt.Sscanf(msg, "field %s not found in type %s", &field, &typ); n == 2 {
		if s, ok := sectionOf(typ); ok {
			msg = fmt.Sprintf("unknown field %q in %s (known: %s)", field, s.what, strings.Join(yamlKeys(s.typ), ", "))
		}
		return &Error{File: file, Line: line, Msg: msg}
	}
	m := cannotUnmarshal.FindStringSubmatch(msg)
	if m == nil {
		return &Error{File: file, Line: line, Msg: msg}
	}
	value, typ := m[2], m[3]
	subject := "value"
	var match []string
	for _, k := range keys[line] {
		if k.tag == "!!"+m[1] && (value == "" || k.value == value) {
			match = append(match, k.key)
		}
	}
	if len(match) == 1 {
		subject = match[0]
	}
	switch {
	case typ == "int64":
		msg = fmt.Sprintf("%s must be an integer, not %q", subject, value)
	case typ == "string":
		msg = subject + " must be a string"
	case strings.HasPrefix(typ, "[]"):
		msg = subject + " must be a list"
	default:
		if s, ok := sectionOf(typ); ok {
			msg = s.what + " must be a mapping"
		}
	}
	return &Error{File: file, Line: line, Msg: msg}
}

var cannotUnmarshal = regexp.MustCompile("^cannot unmarshal !!(\\w+) (?:`(.*)` )?into (.+)$")

// keyAt is a key whose value (or list item) starts on a line: the value's tag and text.
type keyAt struct{ key, tag, value string }

// keysByLine maps each line of data to the keys whose values (or list items) start on it.
func keysByLine(data []byte) map[int][]keyAt {
	out := map[int][]keyAt{}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return out
	}
	add := func(k string, v *yaml.Node) {
		out[v.Line] = append(out[v.Line], keyAt{k, v.ShortTag(), v.Value})
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 1 {
				k := n.Content[i-1].Value
				add(k, c)
				if c.Kind == yaml.SequenceNode {
					for _, item := range c.Content {
						add(k, item)
					}
				}
			}
			walk(c)
		}
	}
	walk(&root)
	return out
}

// section is a mapping of the schedule file: its Go type and what errors call it.
type section struct {
	typ  reflect.Type
	what string
}

var sections = []section{
	{reflect.TypeFor[fileYAML](), "schedule"},
	{reflect.TypeFor[leadTimeYAML](), "leadTime"},
	{reflect.TypeFor[coldStartYAML](), "coldStart"},
	{reflect.TypeFor[peakYAML](), "peak"},
	{reflect.TypeFor[recurrenceYAML](), "recurrence"},
	{reflect.TypeFor[rangeFields](), "exclude range"},
	{reflect.TypeFor[targetYAML](), "target"},
}

func sectionOf(typ string) (section, bool) {
	for _, s := range sections {
		if s.typ.String() == typ {
			return s, true
		}
	}
	return section{}, false
}

// yamlKeys are the keys of a struct type, from its yaml tags, in declaration order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}
