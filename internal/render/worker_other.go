//go:build !linux

package render

import (
	"os"
	"syscall"
)

// selfPeakRSS is not measured off Linux.
func selfPeakRSS() int64 { return 0 }

// workerExecutable is this process' executable, as its path names it now.
func workerExecutable() (string, error) { return os.Executable() }

// workerSysProcAttr has no parent-death signal off Linux.
func workerSysProcAttr() *syscall.SysProcAttr { return nil }
