package schedule

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-gitops/platform/internal/gitrepo"
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

// parser collects errors with positions.
type parser struct {
	file string
	errs ErrorList
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

// fields returns the key → value nodes of a mapping, reporting unknown keys.
func (p *parser) fields(n *yaml.Node, what string, known ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n == nil {
		return out
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s must be a mapping", what)
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ok := false
		for _, kn := range known {
			ok = ok || kn == k.Value
		}
		if !ok {
			p.errorf(k, "unknown field %q in %s (known: %s)", k.Value, what, strings.Join(known, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.errorf(k, "duplicate field %q in %s", k.Value, what)
		}
		out[k.Value] = v
	}
	return out
}

func (p *parser) str(n *yaml.Node, what string) string {
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, "%s must be a string", what)
		return ""
	}
	return n.Value
}

func (p *parser) duration(n *yaml.Node, what string) (time.Duration, bool) {
	s := p.str(n, what)
	if n == nil || s == "" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.errorf(n, "%s: bad duration %q (want e.g. 3m, 90s, 2h30m)", what, s)
		return 0, false
	}
	return d, true
}

func (p *parser) integer(n *yaml.Node, what string) (int64, bool) {
	if n == nil {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Kind != yaml.ScalarNode || err != nil {
		p.errorf(n, "%s must be an integer, not %q", what, n.Value)
		return 0, false
	}
	return v, true
}

// list returns the items of a sequence (a scalar counts as a one-item list).
func (p *parser) list(n *yaml.Node, what string) []*yaml.Node {
	switch {
	case n == nil:
		return nil
	case n.Kind == yaml.SequenceNode:
		return n.Content
	case n.Kind == yaml.ScalarNode:
		return []*yaml.Node{n}
	}
	p.errorf(n, "%s must be a list", what)
	return nil
}

// Parse parses a schedule file. file names it in errors; every error carries its line. Targets
// are not checked against a repository (see CheckTargets). The error is an ErrorList.
func Parse(file string, data []byte) (*Schedule, error) {
	p := &parser{file: file}
	s := &Schedule{File: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line := 0
		var te *yaml.TypeError
		msg := err.Error()
		if !errors.As(err, &te) {
			// yaml: line N: message
			if rest, ok := strings.CutPrefix(msg, "yaml: line "); ok {
				if n, m, ok := strings.Cut(rest, ":"); ok {
					if v, err := strconv.Atoi(n); err == nil {
						line, msg = v, strings.TrimSpace(m)
					}
				}
			}
		}
		return nil, ErrorList{{File: file, Line: line, Msg: "invalid YAML: " + msg}}
	}
	if len(doc.Content) == 0 {
		return nil, ErrorList{{File: file, Msg: "empty schedule"}}
	}
	root := p.fields(doc.Content[0], "schedule", "leadTime", "peaks")
	s.Lead, s.ColdStart = p.leadTime(root["leadTime"])
	seen := map[string]bool{}
	if root["peaks"] == nil {
		p.errorf(doc.Content[0], "no peaks")
	}
	for _, n := range p.list(root["peaks"], "peaks") {
		pk := p.peak(n, s.Lead)
		if pk == nil {
			continue
		}
		if seen[pk.Name] {
			p.errorf(n, "duplicate peak name %q", pk.Name)
		}
		seen[pk.Name] = true
		s.Peaks = append(s.Peaks, pk)
	}
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		return nil, p.errs
	}
	return s, nil
}
