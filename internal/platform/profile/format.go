package profile

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// entry is the schedule.yaml entry of a peak to add.
func entry(pk Peak, now Settings, loc *time.Location) string {
	ns, name, _ := strings.Cut(now.ScaledObject, "/")
	var b strings.Builder
	fmt.Fprintf(&b, "  # Found by `auditor profile`: up to %s req/s, %s.\n", num(pk.RequestsPerSecond), pk.Arithmetic)
	if len(pk.Overlaps) > 0 {
		fmt.Fprintf(&b, "  # Overlaps %s on the same field: the schedule composes them on scale-down.\n", strings.Join(pk.Overlaps, ", "))
	}
	fmt.Fprintf(&b, "  - name: %s\n    recurrence:\n", pk.Name)
	if pk.Kind == Weekly {
		fmt.Fprintf(&b, "      cron: %q\n", pk.Cron)
	} else {
		fmt.Fprintf(&b, "      # Seen on %s: a monthly rule is inferred from the days of the month; check it.\n", strings.Join(pk.Seen, ", "))
		fmt.Fprintf(&b, "      daysOfMonth: [%s]\n      weekendPolicy: %s\n      at: %q\n", joinInts(pk.DaysOfMonth, ", "), schedule.WeekendPreviousBusiness, pk.At)
	}
	fmt.Fprintf(&b, "      timeZone: %s\n    duration: %s\n", loc.String(), shortDuration(pk.Duration))
	fmt.Fprintf(&b, "    target:\n      path: %s\n      kind: ScaledObject\n      name: %s\n      namespace: %s\n      field: spec.minReplicaCount\n    warm: %d\n",
		now.Path, name, ns, pk.Warm)
	return b.String()
}

// shortDuration drops Go's trailing zero units: 3h0m0s is 3h.
func shortDuration(s string) string {
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}

func weekdayIndex(t time.Time) int { return (int(t.Weekday()) + 6) % 7 }

func clock(h int) string { return fmt.Sprintf("%02d:00", h) }

// cronDays is a cron day-of-week field for weekday indexes (0 = Monday): runs become ranges.
func cronDays(days []int) string {
	sort.Ints(days)
	var parts []string
	for i := 0; i < len(days); {
		j := i
		for j+1 < len(days) && days[j+1] == days[j]+1 {
			j++
		}
		a, b := (days[i]+1)%7, (days[j]+1)%7
		switch {
		case i == j:
			parts = append(parts, strconv.Itoa(a))
		case days[j] == 6: // runs into Sunday, which cron spells 0: keep the range up to Saturday
			parts = append(parts, fmt.Sprintf("%d-6", a), "0")
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", a, b))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// dayNames names a set of weekdays for a peak's name: weekdays, weekend, daily or the days.
func dayNames(days []int) string {
	key := joinInts(days, ",")
	switch key {
	case "0,1,2,3,4":
		return "weekday"
	case "5,6":
		return "weekend"
	case "0,1,2,3,4,5,6":
		return "daily"
	}
	var names []string
	for _, d := range days {
		names = append(names, strings.ToLower(weekdays[d]))
	}
	return strings.Join(names, "-")
}

func joinInts(vs []int, sep string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, sep)
}

// num prints a number without float noise.
func num(v float64) string { return strconv.FormatFloat(round(v, 3), 'f', -1, 64) }

// lowerMedian is the middle value, the lesser of the two middle ones for an even count.
func lowerMedian(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	return s[(len(s)-1)/2]
}
