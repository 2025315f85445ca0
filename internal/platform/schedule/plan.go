package schedule

import (
	"sort"
	"time"
)

// Phase is what a firing does.
type Phase string

const (
	// ScaleUp raises the target to Warm ahead of the peak.
	ScaleUp Phase = "scale-up"
	// ScaleDown undoes the scale-up at the end of the peak.
	ScaleDown Phase = "scale-down"
)

// Firing is one occurrence of a peak: when it starts and ends, and when its scale-up fires.
type Firing struct {
	Peak *Peak
	// Start and End bound the peak, in the peak's time zone.
	Start, End time.Time
	// FireTime = Start − Lead.Total: when the scale-up is committed. It identifies the
	// occurrence (trailer Fire-Time).
	FireTime time.Time
	Lead     LeadTime
	// Phase is set by Due (ScaleUp in Plan).
	Phase Phase
	// Late is set by Due for a scale-up run after its fire time (missed while down).
	Late bool
}

// isExcluded reports whether the local day of t is excluded.
func (p *Peak) isExcluded(d Date) bool {
	for _, r := range p.Exclude {
		if r.contains(d) {
			return true
		}
	}
	return false
}

func (p *Peak) businessDay(d Date) bool {
	wd := d.In(p.Location).Weekday()
	return wd != time.Saturday && wd != time.Sunday && !p.isExcluded(d)
}

// adjust applies the weekend policy to a calendar day; ok is false when there is no peak.
func (p *Peak) adjust(d Date) (Date, bool) {
	step := 0
	switch p.WeekendPolicy {
	case WeekendPreviousBusiness:
		step = -1
	case WeekendNextBusiness:
		step = 1
	case WeekendSkip:
		return d, p.businessDay(d)
	default:
		return d, !p.isExcluded(d)
	}
	for i := 0; i < 366 && !p.businessDay(d); i++ {
		d = dateOf(d.In(p.Location).AddDate(0, 0, step))
	}
	return d, p.businessDay(d)
}

func (p *Peak) at(d Date) time.Time {
	return time.Date(d.Year, d.Month, d.Day, p.At.Hour, p.At.Minute, 0, 0, p.Location)
}

// NextStart returns the first start of the peak strictly after t; ok is false when there is
// none (a one-off peak in the past, or nothing within ten years).
func (p *Peak) NextStart(t time.Time) (time.Time, bool) {
	if p.sched != nil {
		next := t
		limit := t.AddDate(10, 0, 0)
		for {
			next = p.sched.Next(next)
			if next.IsZero() || next.After(limit) {
				return time.Time{}, false
			}
			if !p.isExcluded(dateOf(next)) {
				return next, true
			}
		}
	}
	var best time.Time
	consider := func(c time.Time) {
		if c.After(t) && (best.IsZero() || c.Before(best)) {
			best = c
		}
	}
	for _, d := range p.Dates {
		if !p.isExcluded(d) {
			consider(p.at(d))
		}
	}
	if len(p.DaysOfMonth) > 0 {
		local := t.In(p.Location)
		// Start a month early: a day moved back across a month boundary (e.g. the 1st moved
		// to the previous Friday) still counts.
		first := time.Date(local.Year(), local.Month()-1, 1, 0, 0, 0, 0, p.Location)
		for m := 0; m < 12*10 && best.IsZero(); m++ {
			month := first.AddDate(0, m, 0)
			for _, dom := range p.DaysOfMonth {
				d := Date{month.Year(), month.Month(), dom}
				if dateOf(d.In(p.Location)) != d { // no such day this month (e.g. 31 April)
					continue
				}
				if adj, ok := p.adjust(d); ok {
					consider(p.at(adj))
				}
			}
		}
		// Candidates of the next month may still precede those found (moved back): look one
		// more month past the first hit.
		if !best.IsZero() {
			bl := best.In(p.Location)
			month := time.Date(bl.Year(), bl.Month()+1, 1, 0, 0, 0, 0, p.Location)
			for _, dom := range p.DaysOfMonth {
				d := Date{month.Year(), month.Month(), dom}
				if dateOf(d.In(p.Location)) != d {
					continue
				}
				if adj, ok := p.adjust(d); ok {
					consider(p.at(adj))
				}
			}
		}
	}
	return best, !best.IsZero()
}

// firing builds the occurrence starting at start.
func (s *Schedule) firing(p *Peak, start time.Time) Firing {
	return Firing{Peak: p, Start: start, End: start.Add(p.Duration), FireTime: start.Add(-s.Lead.Total), Lead: s.Lead, Phase: ScaleUp}
}

// FiringAt returns the occurrence of p whose scale-up fires at fireTime (Start = fireTime +
// lead time). It is how a firing is rebuilt from its Fire-Time trailer or a --at flag.
func (s *Schedule) FiringAt(p *Peak, fireTime time.Time) Firing {
	start := fireTime.Add(s.Lead.Total).In(p.Location)
	return s.firing(p, start)
}

// Starts lists p's starts in (from, to].
func (p *Peak) Starts(from, to time.Time) []time.Time { return p.starts(from, to) }

// starts lists p's starts in (from, to].
func (p *Peak) starts(from, to time.Time) []time.Time {
	var out []time.Time
	for t := from; ; {
		next, ok := p.NextStart(t)
		if !ok || next.After(to) {
			return out
		}
		out = append(out, next)
		t = next
	}
}

// Plan returns the next n scale-up firings of all peaks with a fire time after now, in fire
// time order.
func (s *Schedule) Plan(now time.Time, n int) []Firing {
	var all []Firing
	for _, p := range s.Peaks {
		t := now.Add(s.Lead.Total) // fire > now ⇔ start > now + lead
		for i := 0; i < n; i++ {
			start, ok := p.NextStart(t)
			if !ok {
				break
			}
			all = append(all, s.firing(p, start))
			t = start
		}
	}
	sortFirings(all, func(f Firing) time.Time { return f.FireTime })
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// Current returns p's occurrence whose window [FireTime, End) contains now, else the next one.
func (s *Schedule) Current(p *Peak, now time.Time) (Firing, bool) {
	// The latest start whose window may still be open: start > now − Duration.
	from := now.Add(-p.Duration)
	start, ok := p.NextStart(from)
	if !ok {
		return Firing{}, false
	}
	return s.firing(p, start), true
}

// Due returns what a scheduler that last ran at lastRun must do at now: the scale-ups whose
// fire time is in (lastRun, now] and whose peak has not ended (Late when the fire time is
// more than a minute ago: missed while down, still useful), and the scale-downs whose end is
// in (lastRun, now]. skipped are the scale-ups missed entirely (the peak already ended).
func (s *Schedule) Due(now, lastRun time.Time) (run, skipped []Firing) {
	for _, p := range s.Peaks {
		for _, start := range p.starts(lastRun.Add(s.Lead.Total), now.Add(s.Lead.Total)) {
			f := s.firing(p, start)
			if !now.Before(f.End) {
				skipped = append(skipped, f)
				continue
			}
			f.Late = now.Sub(f.FireTime) > time.Minute
			run = append(run, f)
		}
		for _, start := range p.starts(lastRun.Add(-p.Duration), now.Add(-p.Duration)) {
			f := s.firing(p, start)
			f.Phase = ScaleDown
			run = append(run, f)
		}
	}
	sortFirings(run, Firing.at)
	sortFirings(skipped, Firing.at)
	return run, skipped
}

// at is when the firing is due: FireTime for a scale-up, End for a scale-down.
func (f Firing) at() time.Time {
	if f.Phase == ScaleDown {
		return f.End
	}
	return f.FireTime
}

// NextEvent returns the time of the next scale-up or scale-down after now (zero if none).
func (s *Schedule) NextEvent(now time.Time) time.Time {
	var best time.Time
	for _, p := range s.Peaks {
		if st, ok := p.NextStart(now.Add(s.Lead.Total)); ok {
			if t := st.Add(-s.Lead.Total); best.IsZero() || t.Before(best) {
				best = t
			}
		}
		if st, ok := p.NextStart(now.Add(-p.Duration)); ok {
			if t := st.Add(p.Duration); best.IsZero() || t.Before(best) {
				best = t
			}
		}
	}
	return best
}

func sortFirings(fs []Firing, key func(Firing) time.Time) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := key(fs[i]), key(fs[j])
		if !a.Equal(b) {
			return a.Before(b)
		}
		return fs[i].Peak.Name < fs[j].Peak.Name
	})
}
