package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// timeValue is --at: a point in time in one of the formats parseTime takes. The zero time is
// "now", read when the command runs.
type timeValue struct {
	t *time.Time
	s string
	// zoned requires an offset: the schedule's peaks have their own time zones, so a time
	// without one would silently be UTC.
	zoned bool
}

func (v *timeValue) String() string {
	if v.s == "" {
		return "now"
	}
	return v.s
}

func (v *timeValue) Set(s string) error {
	if s == "now" || s == "" { // --at "$AT" with AT unset is now, as no flag is
		*v.t, v.s = time.Time{}, ""
		return nil
	}
	t, err := parseTime(s)
	if err != nil {
		return err
	}
	if v.zoned {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Errorf("time %q has no offset: give one (2026-03-01T08:00:00+03:00 or …Z), the peaks have their own time zones", s)
		}
	}
	*v.t, v.s = t, s
	return nil
}

func (v *timeValue) Type() string { return "time" }

// addAtFlag adds --at, the one time flag of every command that acts as of a point in time, with
// usage. old is the flag's earlier name, if it had one: still accepted, hidden, with a warning.
func addAtFlag(cmd *cobra.Command, t *time.Time, usage, old string) {
	v := &timeValue{t: t}
	*t = time.Time{}
	f := cmd.Flags()
	f.Var(v, "at", usage+": RFC 3339 (2026-03-01T12:00:00Z), '2026-03-01 12:00' or '2026-03-01' (UTC), or now")
	addAtAlias(cmd, v, old)
}

// addZonedAtFlag is addAtFlag for a time that must carry its offset (RFC 3339).
func addZonedAtFlag(cmd *cobra.Command, t *time.Time, usage, old string) {
	v := &timeValue{t: t, zoned: true}
	*t = time.Time{}
	cmd.Flags().Var(v, "at", usage+": RFC 3339 with an offset (2026-03-01T08:00:00+03:00), or now")
	addAtAlias(cmd, v, old)
}

func addAtAlias(cmd *cobra.Command, v *timeValue, old string) {
	f := cmd.Flags()
	if old != "" {
		f.Var(v, old, "the former name of --at")
		_ = f.MarkDeprecated(old, "use --at")
	}
}

// orNow is t, or the current time when t is zero (--at not given, or now).
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// parseTime accepts RFC 3339, "2006-01-02 15:04[:05]" and "2006-01-02" (UTC).
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid time %q (want RFC 3339, e.g. 2026-03-01T12:00:00Z, or 2026-03-01 12:00)", s)
}
