package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --at takes one set of formats everywhere; the schedule's want an offset, since peaks have
// their own time zones; empty and now are now.
func TestAtFlag(t *testing.T) {
	for _, tc := range []struct {
		in    string
		zoned bool
		want  time.Time // zero: now
		err   string
	}{
		{in: "", want: time.Time{}},
		{in: "now", zoned: true, want: time.Time{}},
		{in: "2026-03-01T08:00:00+03:00", zoned: true, want: time.Date(2026, 3, 1, 5, 0, 0, 0, time.UTC)},
		{in: "2026-03-01 12:00", want: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		{in: "2026-03-01", want: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{in: "2026-03-01 12:00", zoned: true, err: "has no offset"},
		{in: "yesterday", err: "invalid time"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := time.Now()
			v := &timeValue{t: &got, zoned: tc.zoned}
			err := v.Set(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want.Equal(got), "got %v, want %v", got, tc.want)
		})
	}
}
