// Command auditor keeps a GitOps repository and the live clusters it describes honest: it renders
// what Git says, compares it with what runs, and reports who changed what by hand.
package main

import (
	"errors"
	"fmt"
	"os"
)

// exitError carries a process exit code through cobra; code 1 means "found something", >1 an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	err := newRootCommand().Execute()
	stopProfile()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.code > 1 {
			fmt.Fprintln(os.Stderr, "error:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(2)
}
