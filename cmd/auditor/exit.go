package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// The process exit codes of every command, as kubectl diff's.
const (
	codeOK    = 0 // nothing found
	codeFound = 1 // found something: drift, violations, a failed capacity check, a missed deadline
	codeError = 2 // bad input or an error
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr makes a bad-input error (exit code 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: codeError, err: fmt.Errorf(format, args...)}
}

// failed makes err an error exit (code 2); nil stays nil.
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: codeError, err: err}
}

// found makes msg a "found something" exit (code 1).
func found(msg string) error {
	return &exitError{code: codeFound, err: errors.New(msg)}
}

// flagErrorsExit2 makes malformed flag values and unknown flags usage errors of cmd and its
// sub-commands.
func flagErrorsExit2(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return failed(err) })
}

// exitStatus is the exit code of a command's error, printed to stderr unless it only says
// "found something".
func exitStatus(stderr io.Writer, err error) int {
	if err == nil {
		return codeOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.code > codeFound {
			fmt.Fprintln(stderr, "error:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "error:", err)
	return codeError
}

// inputErr turns a capacity error into exit code 2 when it is bad input.
func inputErr(err error) error {
	if errors.Is(err, capacity.ErrInvalid) {
		return failed(err)
	}
	return err
}

// scheduleErr maps schedule errors to exit codes: malformed schedule 2, missed deadline 1.
func scheduleErr(err error) error {
	var el schedule.ErrorList
	var de *schedule.DeadlineError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &el), errors.Is(err, schedule.ErrNoSchedule):
		return failed(err)
	case errors.As(err, &de):
		return &exitError{code: codeFound, err: err}
	}
	return err
}
