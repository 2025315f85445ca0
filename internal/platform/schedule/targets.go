package schedule

import (
	"errors"
	"fmt"
)

// lineOf is the line of a target key in the schedule file (the target's line if unknown).
func (t Target) lineOf(key string) int {
	if l, ok := t.lines[key]; ok {
		return l
	}
	return t.Line
}

// CheckTargets checks that every peak's target file, object and integer field exist in files
// (a snapshot's files), and that warm does not exceed the object's maximum. The error is an
// ErrorList pointing at the targets in the schedule file.
func (s *Schedule) CheckTargets(files map[string][]byte) error {
	var errs ErrorList
	for _, pk := range s.Peaks {
		t := pk.Target
		data, ok := files[t.Path]
		if !ok {
			errs = append(errs, &Error{File: s.File, Line: t.lineOf("path"), Msg: fmt.Sprintf("peak %q: target file %s not found in the repository", pk.Name, t.Path)})
			continue
		}
		loc, err := lookup(data, t)
		if err != nil {
			line := t.Line
			var le *lookupError
			if errors.As(err, &le) {
				line = t.lineOf(le.Key)
			}
			errs = append(errs, &Error{File: s.File, Line: line, Msg: fmt.Sprintf("peak %q: %v", pk.Name, err)})
			continue
		}
		if loc.max > 0 && pk.Warm > loc.max {
			errs = append(errs, &Error{File: s.File, Line: pk.warmLine, Msg: fmt.Sprintf("peak %q: warm %d exceeds the object's maximum %d (%s:%d)",
				pk.Name, pk.Warm, loc.max, t.Path, loc.maxLine)})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
