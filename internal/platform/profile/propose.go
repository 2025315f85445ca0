package profile

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// Settings are what Git says now about the model's Deployment, which a proposal is held against.
type Settings struct {
	// ScaledObject is the autoscaler of the Deployment: "namespace/name".
	ScaledObject string
	// Path is the file that sets the ScaledObject's minimum in the env (what peaks raise).
	Path string
	// WarmMinimum is its minReplicaCount, MaxReplicas its maxReplicaCount.
	WarmMinimum, MaxReplicas int64
	// Threshold is the queue-depth trigger's threshold, waiting requests per replica (0: none);
	// Trigger is that trigger's index in spec.triggers and TriggerName its name.
	Threshold    float64
	Trigger      int
	TriggerName  string
	TriggerQuery string
	// Schedule is the env's schedule; nil when it has none.
	Schedule *schedule.Schedule
	// GPUsPerReplica, Card and PricePerGPUHour price a replica (no price: no cost).
	GPUsPerReplica  int64
	Card            string
	PricePerGPUHour float64
}

// Targets are what the proposals aim for.
type Targets struct {
	// Utilization is the share of a replica's saturated throughput a replica is planned at
	// (default 0.8).
	Utilization float64
	// TTFT is the time to first token a request may wait in the queue (default 2.5 s, the
	// platform's TTFT SLO).
	TTFT time.Duration
	// BusinessStart and BusinessEnd are the weekday hours in which the minimum never goes
	// below the warm minimum (default 9 and 18).
	BusinessStart, BusinessEnd int
}

func (t Targets) withDefaults() Targets {
	if t.Utilization <= 0 {
		t.Utilization = 0.8
	}
	if t.TTFT <= 0 {
		t.TTFT = 2500 * time.Millisecond
	}
	if t.BusinessStart == 0 && t.BusinessEnd == 0 {
		t.BusinessStart, t.BusinessEnd = 9, 18
	}
	return t
}

var weekdays = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// hourAt is one measured hour: its start in the profile's zone, its rate and queue, and whether
// Prometheus had data for it.
type hourAt struct {
	start       time.Time
	rate, queue float64
	missing     bool
}

// surge is how far above the week's typical hour a date's hour must be to be a peak of its own,
// besides needing more replicas: noise around a replica boundary is not a peak.
const surge = 1.2

// lowerBoundNote says why a rate measured while requests waited understates the demand.
const lowerBoundNote = "requests waited in these hours, so the rate is what vLLM finished (aborts included, when it counts them): a lower bound of the demand"

// Propose turns a profile into settings, against what Git says now.
func Propose(p *Profile, now Settings, t Targets) (*Proposal, error) {
	t = t.withDefaults()
	loc, err := p.Location()
	if err != nil {
		return nil, err
	}
	out := &Proposal{Minimums: []DayMinimums{}, Peaks: []Peak{}}
	mu := p.Replica.RequestsPerSecond
	if mu <= 0 {
		out.Notes = append(out.Notes, "no replica saturated in the window (no rate window with requests waiting throughout): its throughput, and so every replica count, is unknown; state it with --replica-throughput (e.g. from a load test)")
		return out, nil
	}
	if p.Replica.Samples == 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("a replica's throughput, %s req/s, is stated, not measured: no replica saturated in the window", num(mu)))
	}
	out.PerReplica = round(mu*t.Utilization, 3)
	need := func(rate float64) int64 { return int64(math.Ceil(rate/out.PerReplica - 1e-9)) }
	needText := func(rate float64) string {
		return fmt.Sprintf("ceil(%s req/s ÷ (%s req/s a saturated replica × %s)) = %d", num(rate), num(mu), num(t.Utilization), need(rate))
	}

	// The queue may take what the TTFT target leaves after a request's own time to first token
	// (the window's p50): a request behind `threshold` others waits threshold ÷ mu for a slot.
	wait := t.TTFT.Seconds() - p.TTFT.P50
	threshold := math.Max(1, math.Floor(wait*mu+1e-9))
	if wait <= 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("the TTFT p50 (%s s) is at or above the TTFT target (%s s): no queue fits, and the threshold is its least, 1", num(p.TTFT.P50), num(t.TTFT.Seconds())))
	}
	out.Threshold = Change{Now: now.Threshold, Proposed: threshold, Arithmetic: fmt.Sprintf(
		"floor((%s s TTFT target − %s s TTFT p50) × %s req/s a saturated replica finishes) = %s waiting per replica",
		num(t.TTFT.Seconds()), num(p.TTFT.P50), num(mu), num(threshold))}
	if now.Threshold > 0 {
		out.Threshold.Arithmetic += fmt.Sprintf("; at %s, a request behind a full queue waits about %s s", num(now.Threshold), num(round(now.Threshold/mu, 1)))
	}
	out.Threshold.Arithmetic += "; it holds once the replicas KEDA asks for are up, not during their cold start"

	hours := make([]hourAt, len(p.Hourly))
	for i, r := range p.Hourly {
		hours[i] = hourAt{start: p.From.In(loc).Add(time.Duration(i) * time.Hour), rate: r}
		if i < len(p.Queue) {
			hours[i].queue = p.Queue[i]
		}
	}
	for _, i := range p.HoursWithoutData {
		hours[i].missing = true
	}
	base := now.WarmMinimum
	if base < 1 {
		base = 1
	}
	// A date's hour surges when it needs more replicas than the week's lower median of that hour
	// (of two weeks, the lesser), and is 20 % above it: a peak of its date. The week's pattern,
	// which sizes the minimums and the weekly peaks, is then the most of each hour of the week
	// over the hours that do not surge, so a regular week a little busier than another counts.
	usual, _ := weekTypical(hours, lowerMedian, nil)
	above := func(h hourAt) bool {
		n, u := need(h.rate), usual[weekdayIndex(h.start)][h.start.Hour()]
		return !h.missing && n > need(u) && n > base && h.rate >= surge*u
	}
	surges := map[int]bool{}
	for i, h := range hours {
		surges[i] = above(h)
	}
	typical, typicalQueue := weekTypical(hours, slices.Max[[]float64], surges)
	// Minimums: what the week's typical hour needs, never below the warm minimum in business
	// hours nor below one replica at any time.
	for d := range 7 {
		dm := DayMinimums{Day: weekdays[d]}
		for h := range 24 {
			floor := int64(1)
			if d < 5 && h >= t.BusinessStart && h < t.BusinessEnd {
				floor = base
			}
			n := max(need(typical[d][h]), floor)
			if k := len(dm.Ranges); k > 0 && dm.Ranges[k-1].Replicas == n {
				dm.Ranges[k-1].To = h + 1
				continue
			}
			dm.Ranges = append(dm.Ranges, HourRanges{From: h, To: h + 1, Replicas: n})
		}
		out.Minimums = append(out.Minimums, dm)
	}

	// Weekly peaks: runs of a day's typical hours that need more than the warm minimum,
	// grouped by their hours across the weekdays.
	type run struct{ from, to int }
	var found []foundPeak
	weekly := map[run][]int{}
	warm := map[run]int64{}
	top := map[run]float64{}
	waited := map[run]bool{}
	for d := range 7 {
		for h := 0; h < 24; {
			if need(typical[d][h]) <= base {
				h++
				continue
			}
			from, w, tp, q := h, int64(0), 0.0, false
			for ; h < 24 && need(typical[d][h]) > base; h++ {
				w, tp, q = max(w, need(typical[d][h])), math.Max(tp, typical[d][h]), q || typicalQueue[d][h] > 0
			}
			r := run{from: from, to: h}
			weekly[r] = append(weekly[r], d)
			warm[r], top[r], waited[r] = max(warm[r], w), math.Max(top[r], tp), waited[r] || q
		}
	}
	runs := make([]run, 0, len(weekly))
	for r := range weekly {
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].from < runs[j].from || runs[i].from == runs[j].from && runs[i].to < runs[j].to
	})
	for _, r := range runs {
		days := weekly[r]
		pk := Peak{Kind: Weekly, Cron: fmt.Sprintf("0 %d * * %s", r.from, cronDays(days)), At: clock(r.from), Duration: (time.Duration(r.to-r.from) * time.Hour).String(),
			RequestsPerSecond: top[r], Warm: warm[r], Arithmetic: needText(top[r])}
		pk.Name = fmt.Sprintf("%s-%02d00", dayNames(days), r.from)
		if waited[r] {
			pk.LowerBound, pk.Arithmetic = true, pk.Arithmetic+"; "+lowerBoundNote
		}
		var occ []span
		for _, hr := range hours {
			if hr.start.Hour() == r.from && slices.Contains(days, weekdayIndex(hr.start)) {
				occ = append(occ, span{hr.start, hr.start.Add(time.Duration(r.to-r.from) * time.Hour)})
			}
		}
		found = append(found, foundPeak{judge(pk, occ, now), occ})
	}

	// Monthly peaks: hours of a date above what the week's pattern needs, grouped by hours.
	type dated struct {
		run
		dates []time.Time
		hours []int // indexes of the hours in the runs
	}
	byHours := map[run]*dated{}
	monthlyTop := map[run]float64{}
	monthlyWaited := map[run]bool{}
	var order []run
	for i := 0; i < len(hours); {
		hr := hours[i]
		if !above(hr) {
			i++
			continue
		}
		day, first := hr.start.YearDay(), i
		r := run{from: hr.start.Hour()}
		peakRate, queued := 0.0, false
		for i < len(hours) && hours[i].start.YearDay() == day && above(hours[i]) {
			peakRate = math.Max(peakRate, hours[i].rate)
			queued = queued || hours[i].queue > 0
			i++
		}
		r.to = hours[i-1].start.Hour() + 1
		if byHours[r] == nil {
			byHours[r] = &dated{run: r}
			order = append(order, r)
		}
		byHours[r].dates = append(byHours[r].dates, hr.start)
		for k := first; k < i; k++ {
			byHours[r].hours = append(byHours[r].hours, k)
		}
		monthlyTop[r] = math.Max(monthlyTop[r], peakRate)
		monthlyWaited[r] = monthlyWaited[r] || queued
	}
	surgeWarm := map[int]int64{} // hour index → the warm count of the date's peak holding it
	for _, r := range order {
		dd := byHours[r]
		for _, k := range dd.hours {
			surgeWarm[k] = need(monthlyTop[r])
		}
		pk := Peak{Kind: Monthly, At: clock(r.from), Duration: (time.Duration(r.to-r.from) * time.Hour).String(),
			RequestsPerSecond: monthlyTop[r], Warm: need(monthlyTop[r]), Arithmetic: needText(monthlyTop[r])}
		var occ []span
		for _, d := range dd.dates {
			pk.Seen = append(pk.Seen, d.Format(time.DateOnly))
			if !slices.Contains(pk.DaysOfMonth, d.Day()) {
				pk.DaysOfMonth = append(pk.DaysOfMonth, d.Day())
			}
			occ = append(occ, span{d, d.Add(time.Duration(r.to-r.from) * time.Hour)})
		}
		sort.Ints(pk.DaysOfMonth)
		pk.Name = "days-" + joinInts(pk.DaysOfMonth, "-") + fmt.Sprintf("-%02d00", r.from)
		if monthlyWaited[r] {
			pk.LowerBound, pk.Arithmetic = true, pk.Arithmetic+"; "+lowerBoundNote
		}
		found = append(found, foundPeak{judge(pk, occ, now), occ})
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].Kind != found[j].Kind {
			return found[i].Kind == Weekly
		}
		return found[i].Name < found[j].Name
	})
	var lead time.Duration
	if now.Schedule != nil {
		lead = now.Schedule.Lead.Total
	}
	for i := range found {
		if found[i].Action != Add {
			out.Peaks = append(out.Peaks, found[i].Peak)
			continue
		}
		// A peak's field is raised from its fire time, lead before its start, to its end.
		if now.Schedule != nil {
			for _, sp := range now.Schedule.Peaks {
				if sp.Target.Kind == "ScaledObject" && sameObject(sp.Target, now.ScaledObject) && overlaps(sp, found[i].occ, lead) {
					found[i].Overlaps = append(found[i].Overlaps, sp.Name)
				}
			}
		}
		for j := range found {
			if j != i && found[j].Action == Add && spansMeet(found[i].occ, found[j].occ, lead) {
				found[i].Overlaps = append(found[i].Overlaps, found[j].Name+" (proposed)")
			}
		}
		found[i].Entry = entry(found[i].Peak, now, loc)
		out.Peaks = append(out.Peaks, found[i].Peak)
	}
	for i := range out.Peaks {
		if out.Peaks[i].Warm > now.MaxReplicas && now.MaxReplicas > 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("peak %s needs %d replicas, above the ScaledObject's maximum %d", out.Peaks[i].Name, out.Peaks[i].Warm, now.MaxReplicas))
		}
	}
	if now.Schedule != nil {
		out.Lead = now.Schedule.Lead.String()
	}
	out.Cost = weekCost(p, now, hours, surgeWarm, out.Minimums, need)
	return out, nil
}

// PeakReplicas is the most replicas the proposal runs at any time, and when: a peak's warm count
// or an hour's minimum.
func (p *Proposal) PeakReplicas() (replicas int64, when string) {
	for _, d := range p.Minimums {
		for _, r := range d.Ranges {
			if r.Replicas > replicas {
				replicas, when = r.Replicas, fmt.Sprintf("%s %02d:00", d.Day, r.From)
			}
		}
	}
	for _, pk := range p.Peaks {
		if pk.Warm > replicas {
			replicas, when = pk.Warm, "peak "+pk.Name
		}
	}
	return replicas, when
}
