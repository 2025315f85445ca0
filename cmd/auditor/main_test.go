package main

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	gitOpts.cleanup() // the commands' clones on disk, as main removes them
	os.Exit(code)
}
