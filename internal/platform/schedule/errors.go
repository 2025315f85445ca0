package schedule

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a problem in a schedule file, at a line.
type Error struct {
	File         string
	Line, Column int
	Msg          string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// ErrorList is every problem found in a schedule file, in line order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// ErrNoSchedule is returned by Load when the environment has no schedule file.
var ErrNoSchedule = errors.New("no schedule file")
