package capacity

import (
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "10Gi", want: 10 << 30},
		{in: "10GiB", want: 10 << 30},
		{in: "10GB", want: 10e9},
		{in: "10G", want: 10e9},
		{in: "16 GB", want: 16e9},
		{in: "16060522496", want: 16060522496},
		{in: "4096B", want: 4096},
		{in: "128KiB", want: 128 << 10},
		{in: "1kB", want: 1000},
		{in: "1KB", want: 1000},
		{in: "1K", want: 1000},
		{in: "1.5Gi", want: 3 << 29},
		{in: "0.5", want: 1}, // rounded up to a whole byte
		{in: "0", want: 0},
		{in: "", wantErr: true},
		{in: "-1Gi", wantErr: true},
		{in: "ten gigs", wantErr: true},
		{in: "10Gbit", wantErr: true},
		{in: "100E", wantErr: true}, // beyond int64
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBytes(tt.in)
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseBytes(%q) = %d, %v; want an ErrInvalid error", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseBandwidth(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{in: "1Gbit/s", want: 125e6},
		{in: "1 Gbit/s", want: 125e6},
		{in: "10Gbps", want: 1.25e9},
		{in: "10Gb/s", want: 1.25e9},
		{in: "125MB/s", want: 125e6},
		{in: "2GB/s", want: 2e9},
		{in: "1GiB/s", want: 1 << 30},
		{in: "800Mbit/s", want: 100e6},
		{in: "100kB/s", want: 1e5},
		{in: "100KB/s", want: 1e5},
		{in: "8bit/s", want: 1},
		{in: "1.5GB/s", want: 1.5e9},
		{in: "1Gbit", wantErr: true},
		{in: "1GX/s", wantErr: true},
		{in: "0GB/s", wantErr: true},
		{in: "-1GB/s", wantErr: true},
		{in: "fastGB/s", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBandwidth(tt.in)
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseBandwidth(%q) = %g, %v; want an ErrInvalid error", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseBandwidth(%q) = %g, %v; want %g", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{999, "999 B"},
		{131072, "128 KiB"},
		{1048576000, "0.98 GiB"},
		{10 << 30, "10 GiB"},
		{-(1 << 20), "-1 MiB"},
	}
	for _, tt := range tests {
		if got := HumanBytes(tt.in); got != tt.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHumanBandwidth(t *testing.T) {
	if got, want := HumanBandwidth(125e6), "125 MB/s (1 Gbit/s)"; got != want {
		t.Errorf("HumanBandwidth(125e6) = %q, want %q", got, want)
	}
}
