//go:build !linux

package localcluster

import "syscall"

// attachedAttr makes an attached process lead a process group of its own. Pdeathsig is Linux's
// alone: here the process is not killed when the test binary dies. A cluster in a temporary
// directory still has its reaper (startReaper), which kills its processes by their pid files
// once this process is gone; one in Options.Dir runs on until stopped (make cluster-down).
func attachedAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
