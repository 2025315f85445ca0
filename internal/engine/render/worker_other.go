//go:build !linux

package render

import (
	"os"
	"os/exec"
)

// selfPeakRSS is not measured off Linux.
func selfPeakRSS() int64 { return 0 }

// workerExecutable is this process' executable, as its path names it now.
func workerExecutable() (string, error) { return os.Executable() }

// prepareWorker leaves the defaults off Linux: no parent-death signal, no process group.
func prepareWorker(*exec.Cmd) {}

// startWorker starts cmd.
func startWorker(cmd *exec.Cmd) error { return cmd.Start() }
