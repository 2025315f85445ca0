//go:build !linux

package render

import "os"

// peakRSS is not measured off Linux.
func peakRSS(*os.ProcessState) int64 { return 0 }
