package capacity

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrInvalid is wrapped by every error this package returns for an input out of range or
// unparsable, so callers can tell bad input (errors.Is(err, ErrInvalid)) from anything else.
var ErrInvalid = errors.New("invalid input")

// byteSuffixes maps the byte-unit spellings people write ("GB", "GiB", "kB") to the
// Kubernetes quantity suffixes ("G", "Gi", "k"). Longest first, so "GiB" wins over "B".
var byteSuffixes = []struct{ from, to string }{
	{"KiB", "Ki"}, {"MiB", "Mi"}, {"GiB", "Gi"}, {"TiB", "Ti"}, {"PiB", "Pi"}, {"EiB", "Ei"},
	{"kB", "k"}, {"KB", "k"}, {"MB", "M"}, {"GB", "G"}, {"TB", "T"}, {"PB", "P"}, {"EB", "E"},
	{"K", "k"}, // "10K" is what people mean by kilo; Kubernetes only knows lower-case k
	{"B", ""},
}

// ParseBytes parses a size in bytes written as a Kubernetes quantity ("10Gi", "16G",
// "16060522496") or with a byte unit ("10GiB", "16GB", "512 MB", "4096B"). Binary prefixes
// (Ki, Mi, Gi…) are powers of 1024, decimal ones (k, M, G…) powers of 1000. Fractions are
// rounded up to a whole byte. Negative sizes are rejected.
func ParseBytes(s string) (int64, error) {
	norm := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	if norm == "" {
		return 0, fmt.Errorf("size %q: empty: %w", s, ErrInvalid)
	}
	for _, sfx := range byteSuffixes {
		if strings.HasSuffix(norm, sfx.from) {
			norm = strings.TrimSuffix(norm, sfx.from) + sfx.to
			break
		}
	}
	q, err := resource.ParseQuantity(norm)
	if err != nil {
		return 0, fmt.Errorf("size %q: want e.g. 10Gi, 10GiB, 16GB or a byte count: %w", s, errors.Join(ErrInvalid, err))
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("size %q: negative: %w", s, ErrInvalid)
	}
	v, ok := q.AsInt64()
	if !ok {
		// Fractional bytes ("1.5k" is fine, "0.5" is not an integer) or too large.
		f := q.AsApproximateFloat64()
		if f >= math.MaxInt64 {
			return 0, fmt.Errorf("size %q: too large: %w", s, ErrInvalid)
		}
		v = int64(math.Ceil(f))
	}
	return v, nil
}

// bandwidthPrefixes are the multipliers of a bandwidth's unit prefix. Decimal prefixes are
// case-insensitive for k only ("kbit/s", "Kbit/s"); the rest follow SI.
var bandwidthPrefixes = []struct {
	prefix string
	mult   float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
	{"", 1},
}

// ParseBandwidth parses a transfer rate and returns it in bytes per second. The unit is a
// prefix (k, M, G, T, or binary Ki, Mi, Gi, Ti), then "bit" or "b" for bits or "B" for bytes,
// then "/s" or "ps": "1Gbit/s" = 125,000,000 B/s, "10Gbps" = 1.25e9 B/s, "125MB/s" =
// 125,000,000 B/s, "2GB/s" = 2e9 B/s, "1GiB/s" = 1,073,741,824 B/s. Zero and negative rates are
// rejected: nothing would ever arrive.
func ParseBandwidth(s string) (float64, error) {
	norm := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	var rest string
	switch {
	case strings.HasSuffix(norm, "/s"):
		rest = strings.TrimSuffix(norm, "/s")
	case strings.HasSuffix(norm, "ps"):
		rest = strings.TrimSuffix(norm, "ps")
	default:
		return 0, fmt.Errorf("bandwidth %q: want a rate per second, e.g. 1Gbit/s, 10Gbps, 125MB/s, 2GB/s: %w", s, ErrInvalid)
	}
	var bits bool
	switch {
	case strings.HasSuffix(rest, "bit"):
		bits, rest = true, strings.TrimSuffix(rest, "bit")
	case strings.HasSuffix(rest, "b"):
		bits, rest = true, strings.TrimSuffix(rest, "b")
	case strings.HasSuffix(rest, "B"):
		rest = strings.TrimSuffix(rest, "B")
	default:
		return 0, fmt.Errorf("bandwidth %q: unit must be bit, b (bits) or B (bytes) per second: %w", s, ErrInvalid)
	}
	mult := 1.0
	for _, p := range bandwidthPrefixes {
		if p.prefix != "" && strings.HasSuffix(rest, p.prefix) {
			mult, rest = p.mult, strings.TrimSuffix(rest, p.prefix)
			break
		}
	}
	n, err := strconv.ParseFloat(rest, 64)
	if err != nil {
		return 0, fmt.Errorf("bandwidth %q: bad number %q: %w", s, rest, errors.Join(ErrInvalid, err))
	}
	v := n * mult
	if bits {
		v /= 8
	}
	if !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bandwidth %q: must be positive and finite: %w", s, ErrInvalid)
	}
	return v, nil
}

// HumanBytes formats a byte count with binary units, at most two decimals, switching unit
// below 1000 so that 1,048,576,000 B reads "0.98 GiB" and 131,072 B "128 KiB".
func HumanBytes(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(b), 0
	neg := v < 0
	if neg {
		v = -v
	}
	for v >= 1000 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if neg {
		s = "-" + s
	}
	return s + " " + units[i]
}

// HumanBandwidth formats bytes per second both as bytes and as bits, e.g. "125 MB/s (1 Gbit/s)".
func HumanBandwidth(bps float64) string {
	return si(bps) + "B/s (" + si(bps*8) + "bit/s)"
}

func si(v float64) string {
	prefixes := []string{"", "k", "M", "G", "T", "P"}
	i := 0
	for v >= 1000 && i < len(prefixes)-1 {
		v /= 1000
		i++
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " " + prefixes[i]
}
