package render

import (
	"os"
	"syscall"
)

// peakRSS is a finished process' peak resident set size in bytes (Linux reports kilobytes).
func peakRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}
