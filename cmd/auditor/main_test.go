package main

import (
	"os"
	"testing"
)

// runMainEnv makes this test binary run as the auditor CLI (main, with its arguments), for tests
// that need a real process: signals, exit statuses.
const runMainEnv = "AUDITOR_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	code := m.Run()
	gitOpts.cleanup() // the commands' clones on disk, as main removes them
	os.Exit(code)
}
