// Package schedule turns known traffic peaks into Git commits: ahead of each peak, by the time a
// cold replica needs to become ready (Argo CD sync delay + cold start + margin), it raises a
// KEDA ScaledObject's minReplicaCount (or an HPA's minReplicas) in the overlay, and when the
// peak is over it reverts that commit. Peaks live in clusters/<env>/schedule.yaml, outside the
// paths Argo CD syncs.
package schedule

import (
	"fmt"
	"path"
	"strings"
	"time"
	_ "time/tzdata" // time zones also in distroless images

	"github.com/robfig/cron/v3"

	"github.com/llm-gitops/platform/internal/platform/capacity"
)

// Path is where an environment's schedule lives in the repository.
func Path(env string) string { return path.Join("clusters", env, "schedule.yaml") }

// Default lead-time inputs.
const (
	DefaultArgoSyncDelay = 3 * time.Minute
)

// Weekend policies of calendar recurrences.
const (
	WeekendNone             = "none"                // fire on the day as is
	WeekendSkip             = "skip"                // no peak when the day is not a business day
	WeekendPreviousBusiness = "previousBusinessDay" // move to the previous business day
	WeekendNextBusiness     = "nextBusinessDay"     // move to the next business day
)

// Schedule is one environment's schedule file, parsed and validated.
type Schedule struct {
	// File is the file name used in errors (e.g. clusters/prod/schedule.yaml).
	File string
	// Lead is the lead time every peak fires ahead of its start.
	Lead LeadTime
	// ColdStart are the cold-start inputs the lead time was estimated from.
	ColdStart capacity.ColdStart
	Peaks     []*Peak
}

// LeadTime is how long before a peak's start a scale-up is committed.
type LeadTime struct {
	// ArgoSyncDelay is how long Argo CD takes to apply a pushed commit (polling or webhook).
	ArgoSyncDelay time.Duration
	// ColdStart is the estimate of a replica's cold start (four stages).
	ColdStart capacity.ColdStartEstimate
	// Margin is added on top.
	Margin time.Duration
	// Total = ArgoSyncDelay + ColdStart.Total + Margin.
	Total time.Duration
}

// String is the breakdown in one line: "14m36s = argo sync 3m0s + cold start 5m36s (...) + margin 6m0s".
func (l LeadTime) String() string {
	var st []string
	for _, s := range l.ColdStart.Stages {
		st = append(st, fmt.Sprintf("%s %s", s.Name, s.Duration))
	}
	return fmt.Sprintf("%s = argo sync delay %s + cold start %s (%s) + margin %s",
		l.Total, l.ArgoSyncDelay, l.ColdStart.Total, strings.Join(st, ", "), l.Margin)
}

// Peak is one recurring (or one-off) traffic peak.
type Peak struct {
	Name string
	// Line is the line of the peak in the schedule file.
	Line int

	// Cron is a 5-field cron expression evaluated in Location (empty for calendar rules).
	Cron string
	// DaysOfMonth, Dates and At are calendar rules cron cannot express; WeekendPolicy says
	// what to do when a day of month is not a business day (weekend or excluded date).
	DaysOfMonth   []int
	WeekendPolicy string
	Dates         []Date
	At            Clock
	// TimeZone names Location, in which all of the peak's times are computed.
	TimeZone string
	Location *time.Location

	// Exclude are dates (local to Location) on which the peak does not happen.
	Exclude []DateRange
	// Duration is how long the peak lasts from its start.
	Duration time.Duration
	Target   Target
	// Warm is the replica count during the peak.
	Warm int64

	sched    cron.Schedule
	warmLine int
}

// Target is the field of an object in the repository that a peak raises.
type Target struct {
	// Path is the file in the repository, e.g. overlays/prod/scaling.yaml.
	Path string
	Kind string
	Name string
	// Namespace is optional; it disambiguates objects of the same kind and name.
	Namespace string
	// Field is a dotted path, spec.minReplicaCount (ScaledObject) or spec.minReplicas (HPA).
	Field string
	// Line is the line of the target in the schedule file; lines the line of each key.
	Line  int
	lines map[string]int
}

func (t Target) String() string {
	return fmt.Sprintf("%s %s/%s %s", t.Path, t.Kind, t.Name, t.Field)
}

// Date is a calendar day.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

func dateOf(t time.Time) Date { y, m, d := t.Date(); return Date{y, m, d} }

func (d Date) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// In returns midnight of d in loc (normalised: Day 0 is the last day of the previous month).
func (d Date) In(loc *time.Location) time.Time {
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
}

func (d Date) before(o Date) bool {
	if d.Year != o.Year {
		return d.Year < o.Year
	}
	if d.Month != o.Month {
		return d.Month < o.Month
	}
	return d.Day < o.Day
}

// DateRange is an inclusive range of days (From == To for a single day).
type DateRange struct{ From, To Date }

func (r DateRange) contains(d Date) bool { return !d.before(r.From) && !r.To.before(d) }

// Clock is a time of day.
type Clock struct{ Hour, Minute int }

func (c Clock) String() string { return fmt.Sprintf("%02d:%02d", c.Hour, c.Minute) }

// Peak returns the peak named name, or nil.
func (s *Schedule) Peak(name string) *Peak {
	for _, p := range s.Peaks {
		if p.Name == name {
			return p
		}
	}
	return nil
}
