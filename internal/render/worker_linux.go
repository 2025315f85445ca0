package render

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// selfPeakRSS is this process' own peak resident set size in bytes (VmHWM). A worker reports it
// in its trailer: the rusage of a finished child would not do, as Linux starts an exec'd child's
// maximum at its parent's peak (the exec replaces the memory it shared with its parent, and the
// high-water mark of that memory is kept).
func selfPeakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(v); len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// workerExecutable is the file this process runs: /proc/self/exe names the binary it was started
// from even when a package upgrade has since replaced the file at its path, so a worker is never
// a newer version speaking another protocol.
func workerExecutable() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// workerSysProcAttr makes the kernel kill a worker whose parent dies (SIGKILL included), so no
// orphan renders on for a daemon that is gone. The kernel sends it when the parent's thread that
// started the worker exits; Go's threads outlive the process unless a goroutine locked to one
// exits, which the daemon's code does not do.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
