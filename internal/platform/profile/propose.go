package profile

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
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

// Proposal is the settings a profile asks for, each with its arithmetic.
type Proposal struct {
	// PerReplica is the requests a second one replica is planned for: its saturated throughput
	// × the utilization target.
	PerReplica float64 `json:"perReplicaRequestsPerSecond"`
	// Threshold is the queue-depth trigger's threshold.
	Threshold Change `json:"threshold"`
	// Minimums are the minimum replicas of each day of the week, in hour ranges.
	Minimums []DayMinimums `json:"minimums"`
	// Peaks are the peaks found, with what the schedule does about each.
	Peaks []Peak `json:"peaks"`
	// Lead is the schedule's lead time, which each peak's scale-up fires ahead of its start.
	Lead string `json:"leadTime,omitempty"`
	// Cost is the GPU cost of a typical week now and at the proposed minimums.
	Cost *Cost `json:"cost,omitempty"`
	// Notes say what could not be proposed, and why.
	Notes []string `json:"notes,omitempty"`
}

// Cost is what a typical week of the profile costs in GPUs when the autoscaler follows the load
// above a floor: now, the warm minimum all week; proposed, the minimums by hour.
type Cost struct {
	Basis                                     string  `json:"basis"`
	NowUSDPerWeek, ProposedUSDPerWeek         float64 `json:"-"`
	NowUSDPer1kTokens, ProposedUSDPer1kTokens float64 `json:"-"`
	Now                                       string  `json:"now"`
	Proposed                                  string  `json:"proposed"`
}

// Change is a setting now and proposed.
type Change struct {
	Now        float64 `json:"now"`
	Proposed   float64 `json:"proposed"`
	Arithmetic string  `json:"arithmetic"`
}

// DayMinimums are one day's minimum replicas by hour range.
type DayMinimums struct {
	Day    string       `json:"day"`
	Ranges []HourRanges `json:"ranges"`
}

// HourRanges is a minimum that holds from hour From to hour To (exclusive).
type HourRanges struct {
	From     int   `json:"from"`
	To       int   `json:"to"`
	Replicas int64 `json:"replicas"`
}

// Peak kinds.
const (
	Weekly  = "weekly"  // the same hours on the same weekdays of every week
	Monthly = "monthly" // hours above the week's pattern on days of the month
)

// Peak is a peak found in the profile.
type Peak struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Cron is a weekly peak's start; DaysOfMonth a monthly one's days and At its start.
	Cron        string `json:"cron,omitempty"`
	DaysOfMonth []int  `json:"daysOfMonth,omitempty"`
	At          string `json:"at"`
	Duration    string `json:"duration"`
	// Seen are the dates it was seen on (monthly peaks).
	Seen []string `json:"seen,omitempty"`
	// RequestsPerSecond is the highest hourly rate in it; Warm the replicas it needs.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	Warm              int64   `json:"warm"`
	// LowerBound is true when requests waited in the peak's hours: its rate is what vLLM
	// finished, and Warm may be too few.
	LowerBound bool   `json:"lowerBound,omitempty"`
	Arithmetic string `json:"arithmetic"`
	// Overlaps are the peaks of the same field, in the schedule or proposed, whose raises (fire
	// time to end) meet an added peak's. The schedule composes them: a scale-down restores the
	// field's value without the peaks that ended, and never goes under one still raising it.
	Overlaps []string `json:"overlaps,omitempty"`
	// Action is "covered" (a schedule peak holds every occurrence at enough replicas), "raise"
	// (it holds them with too few: CoveredBy's warm count goes to Warm) or "add".
	Action    string `json:"action"`
	CoveredBy string `json:"coveredBy,omitempty"`
	// Entry is the schedule.yaml entry to add (Action "add").
	Entry string `json:"entry,omitempty"`
}

// Actions of a found peak.
const (
	Covered = "covered"
	Raise   = "raise"
	Add     = "add"
)

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

// weekCost prices the average measured week: each hour runs what its load needs, at least the
// floor. Now the floor is the warm minimum all week; proposed, the minimums by hour and, in the
// hours of a date's peak, its warm count. A replica costs its GPUs at the stated price. Tokens
// are the generated ones, a saturated replica's tokens per request times the hour's requests.
func weekCost(p *Profile, now Settings, hours []hourAt, surgeWarm map[int]int64, mins []DayMinimums, need func(float64) int64) *Cost {
	if now.PricePerGPUHour <= 0 || now.GPUsPerReplica <= 0 || p.Replica.RequestsPerSecond <= 0 || p.Replica.TokensPerSecond <= 0 {
		return nil
	}
	perRequest := p.Replica.TokensPerSecond / p.Replica.RequestsPerSecond
	var nowHours, propHours, tokens, measured float64
	for i, h := range hours {
		if h.missing {
			continue
		}
		measured++
		load := need(h.rate)
		nowHours += float64(max(now.WarmMinimum, load, 1))
		propHours += float64(max(mins[weekdayIndex(h.start)].At(h.start.Hour()), surgeWarm[i], load))
		tokens += h.rate * 3600 * perRequest
	}
	if measured == 0 {
		return nil
	}
	weeks := measured / (7 * 24)
	nowHours, propHours, tokens = nowHours/weeks, propHours/weeks, tokens/weeks
	price := float64(now.GPUsPerReplica) * now.PricePerGPUHour
	c := &Cost{
		Basis: fmt.Sprintf("%d GPU a replica on %s at %s USD per GPU-hour; %s generated tokens a request; the average of %s measured weeks", now.GPUsPerReplica, now.Card,
			num(now.PricePerGPUHour), num(round(perRequest, 1)), num(round(weeks, 2))),
		NowUSDPerWeek: round(nowHours*price, 2), ProposedUSDPerWeek: round(propHours*price, 2),
	}
	if tokens > 0 {
		c.NowUSDPer1kTokens = round(c.NowUSDPerWeek/tokens*1000, 5)
		c.ProposedUSDPer1kTokens = round(c.ProposedUSDPerWeek/tokens*1000, 5)
	}
	c.Now = fmt.Sprintf("now (warm minimum %d, and what the load needs above it): %s replica-hours a week, %s USD, %s USD per 1k generated tokens",
		now.WarmMinimum, num(round(nowHours, 1)), num(c.NowUSDPerWeek), strconv.FormatFloat(c.NowUSDPer1kTokens, 'f', -1, 64))
	c.Proposed = fmt.Sprintf("proposed (the minimums by hour, the dates' peaks, and the load above them): %s replica-hours a week, %s USD, %s USD per 1k generated tokens",
		num(round(propHours, 1)), num(c.ProposedUSDPerWeek), strconv.FormatFloat(c.ProposedUSDPer1kTokens, 'f', -1, 64))
	return c
}

// When says when a peak starts: its cron rule, or its days of the month.
func (pk Peak) When() string {
	if pk.Kind == Weekly {
		return fmt.Sprintf("cron %q", pk.Cron)
	}
	return "days " + joinInts(pk.DaysOfMonth, ", ") + " of the month"
}

// At is the minimum at hour h of the day.
func (d DayMinimums) At(h int) int64 {
	for _, r := range d.Ranges {
		if h >= r.From && h < r.To {
			return r.Replicas
		}
	}
	return 0
}

// weekTypical is, for each hour of the week, of gives of the rates and of the queues of that hour
// over the weeks measured, leaving out hours without data and the hours of skip.
func weekTypical(hours []hourAt, of func([]float64) float64, skip map[int]bool) (rate, queue [7][24]float64) {
	var rates, queues [7][24][]float64
	for i, h := range hours {
		if h.missing || skip[i] {
			continue
		}
		d := weekdayIndex(h.start)
		rates[d][h.start.Hour()] = append(rates[d][h.start.Hour()], h.rate)
		queues[d][h.start.Hour()] = append(queues[d][h.start.Hour()], h.queue)
	}
	for d := range 7 {
		for h := range 24 {
			if len(rates[d][h]) > 0 {
				rate[d][h], queue[d][h] = of(rates[d][h]), of(queues[d][h])
			}
		}
	}
	return rate, queue
}

type span struct{ from, to time.Time }

// judge says what the schedule does about a found peak: its occurrences in the window are
// covered when one schedule peak of the ScaledObject holds each of them.
func judge(pk Peak, occ []span, now Settings) Peak {
	pk.Action = Add
	if now.Schedule != nil {
		for _, sp := range now.Schedule.Peaks {
			if sp.Target.Kind != "ScaledObject" || !sameObject(sp.Target, now.ScaledObject) {
				continue
			}
			if !holdsAll(sp, occ) {
				continue
			}
			pk.CoveredBy = sp.Name
			pk.Action = Covered
			if sp.Warm < pk.Warm {
				pk.Action = Raise
				pk.Arithmetic += fmt.Sprintf("; %s holds it with warm %d", sp.Name, sp.Warm)
			}
			return pk
		}
	}
	return pk
}

// foundPeak is a peak found, with the times it was seen.
type foundPeak struct {
	Peak
	occ []span
}

// overlaps says whether one of the schedule peak's raises (lead before its start to its end)
// meets one of occ's (lead before each to its end).
func overlaps(sp *schedule.Peak, occ []span, lead time.Duration) bool {
	for _, o := range occ {
		for _, s := range sp.Starts(o.from.Add(-sp.Duration-lead), o.to.Add(lead-time.Second)) {
			if s.Add(-lead).Before(o.to) && s.Add(sp.Duration).After(o.from.Add(-lead)) {
				return true
			}
		}
	}
	return false
}

// spansMeet says whether a raise of a (lead before each start to its end) meets one of b.
func spansMeet(a, b []span, lead time.Duration) bool {
	for _, x := range a {
		for _, y := range b {
			if x.from.Add(-lead).Before(y.to) && y.from.Add(-lead).Before(x.to) {
				return true
			}
		}
	}
	return false
}

func sameObject(t schedule.Target, nsName string) bool {
	ns, name, _ := strings.Cut(nsName, "/")
	return t.Name == name && (t.Namespace == "" || t.Namespace == ns)
}

// holdsAll says whether each occurrence lies inside one of the peak's.
func holdsAll(sp *schedule.Peak, occ []span) bool {
	for _, o := range occ {
		held := false
		for _, s := range sp.Starts(o.from.Add(-sp.Duration-time.Second), o.from) {
			if !s.After(o.from) && !s.Add(sp.Duration).Before(o.to) {
				held = true
				break
			}
		}
		if !held {
			return false
		}
	}
	return len(occ) > 0
}

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
