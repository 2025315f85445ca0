package gpustack

import (
	"fmt"
	"strconv"
	"strings"
)

// version is a dotted version (580.159.03, 12.9), compared part by part; missing parts are 0.
type version []int

func parseVersion(s string) (version, error) {
	if s == "" {
		return nil, fmt.Errorf("no version")
	}
	var v version
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("version %q is not dotted numbers", s)
		}
		v = append(v, n)
	}
	return v, nil
}

func (v version) less(w version) bool {
	for i := range max(len(v), len(w)) {
		a, b := 0, 0
		if i < len(v) {
			a = v[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return a < b
		}
	}
	return false
}

// Verdict is whether a driver runs a CUDA, and by which of NVIDIA's minimums.
type Verdict struct {
	OK bool
	// How says which minimum applies: "full" (the minor's toolkit minimum), "minor-version
	// compatibility" (the major's), or why neither is known.
	How string
	// Minimum is the minimum that decided (the major's when the driver is below both).
	Minimum string
}

// Compatible says whether driver runs an image built for cuda (12.9): at or above the minor's
// full minimum, else at or above the major's minor-version compatibility minimum.
func (c CUDATable) Compatible(driver, cuda string) (Verdict, error) {
	d, err := parseVersion(driver)
	if err != nil {
		return Verdict{}, fmt.Errorf("driver: %w", err)
	}
	major, _, _ := strings.Cut(cuda, ".")
	minor := cuda
	if parts := strings.SplitN(cuda, ".", 3); len(parts) >= 2 {
		minor = parts[0] + "." + parts[1]
	}
	if full, ok := c.Full[minor]; ok {
		if f, _ := parseVersion(full); !d.less(f) {
			return Verdict{OK: true, How: "full", Minimum: full}, nil
		}
	}
	compat, ok := c.MinorCompatibility[major]
	if !ok {
		if full, ok := c.Full[minor]; ok {
			return Verdict{How: "full", Minimum: full}, nil
		}
		return Verdict{How: fmt.Sprintf("no minimum known for CUDA %s", cuda)}, nil
	}
	m, _ := parseVersion(compat)
	if d.less(m) {
		return Verdict{How: "minor-version compatibility", Minimum: compat}, nil
	}
	return Verdict{OK: true, How: "minor-version compatibility", Minimum: compat}, nil
}
