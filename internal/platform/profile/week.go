package profile

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/platform/schedule"
)

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
