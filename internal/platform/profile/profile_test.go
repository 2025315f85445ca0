package profile_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/platform/schedule"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// measured is the profile of testfixture.QwenTraffic as a real Prometheus, filled by promtool,
// answers; measured once per test binary.
var measured struct {
	once sync.Once
	p    *profile.Profile
	err  error
}

// measure returns the measured profile; the first test to ask runs the server for its own
// duration.
func measure(t *testing.T) *profile.Profile {
	t.Helper()
	measured.once.Do(func() { measured.p, measured.err = measureOnce(t) })
	require.NoError(t, measured.err)
	require.NotNil(t, measured.p, "the first measurement did not finish")
	return measured.p
}

// prometheusOf starts a real Prometheus holding tr's series and returns its API, with the
// source of a profile of tr's whole window in Moscow's hours.
func prometheusOf(t *testing.T, tr testfixture.Traffic) (promv1.API, profile.Source) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, tr.WriteOpenMetrics(&buf))
	client, err := api.NewClient(api.Config{Address: testcluster.StartPrometheus(t, buf.Bytes())})
	require.NoError(t, err)
	loc, err := time.LoadLocation("Europe/Moscow")
	require.NoError(t, err)
	return promv1.NewAPI(client), profile.Source{Model: tr.Model, Service: tr.Service, From: tr.Start, To: tr.End, Location: loc,
		RateWindow: 15 * time.Minute} // three of the fixture's 5-minute scrapes
}

func measureOnce(t *testing.T) (*profile.Profile, error) {
	t.Helper()
	prom, src := prometheusOf(t, testfixture.QwenTraffic())
	p, err := profile.Measure(context.Background(), prom, src)
	return p, err
}

// need is the replicas rate needs at 80 % of a replica's saturated throughput.
func need(tr testfixture.Traffic, rate float64) int64 {
	return int64(math.Ceil(rate / (tr.ServedPerPod * 0.8)))
}

func TestProfileOfFourWeeksFromARealPrometheus(t *testing.T) {
	tr := testfixture.QwenTraffic()
	p := measure(t)

	require.Len(t, p.Hourly, 28*24)
	for i, got := range p.Hourly {
		start := tr.Start.Add(time.Duration(i) * time.Hour)
		require.InDelta(t, testfixture.QwenArrivals(start), got, 1e-3, "hour %d (%s)", i, start)
	}
	mondayTen := 10 // Monday 2026-11-02 10:00-11:00: both pods saturated, 30 s of excess each
	_, _, aborted, _ := tr.PerPod(tr.Start.Add(10 * time.Hour))
	assert.InDelta(t, 2*aborted*tr.AbandonAfter.Seconds(), p.Queue[mondayTen], 1e-3)
	assert.InDelta(t, p.Queue[mondayTen], p.Queue[11], 1e-3, "11:00-12:00 is saturated to its end")
	assert.Zero(t, p.Queue[8], "08:00-09:00 has no queue: the sample at 09:00 is the next hour's")
	assert.Zero(t, p.Queue[3])

	assert.InDelta(t, tr.Prompt.Quantile(0.5), p.Tokens.Prompt.P50, 0.01)
	assert.InDelta(t, tr.Prompt.Quantile(0.95), p.Tokens.Prompt.P95, 0.01)
	assert.InDelta(t, tr.Response.Quantile(0.5), p.Tokens.Response.P50, 0.01)
	assert.InDelta(t, tr.Response.Quantile(0.95), p.Tokens.Response.P95, 0.01)
	ttft := ttftMixture(tr)
	assert.InDelta(t, ttft.Quantile(0.5), p.TTFT.P50, 0.01)
	assert.InDelta(t, ttft.Quantile(0.95), p.TTFT.P95, 0.01)

	assert.InDelta(t, tr.ServedPerPod, p.Replica.RequestsPerSecond, 1e-3)
	assert.InDelta(t, tr.ServedPerPod*tr.Response.Mean, p.Replica.TokensPerSecond, 0.1)
	assert.Positive(t, p.Replica.Samples)

	data, err := p.Marshal()
	require.NoError(t, err)
	back, err := profile.Parse("qwen.yaml", data)
	require.NoError(t, err)
	if d := cmp.Diff(p, back); d != "" {
		t.Errorf("profile file round trip (-measured +read):\n%s", d)
	}
}

// ttftMixture is the fixture's TTFT over the window: each step's served requests observe the
// fast distribution without a queue and the slow one with a queue.
func ttftMixture(tr testfixture.Traffic) testfixture.Distribution {
	fast, slow := 0.0, 0.0
	for t := tr.Start; t.Before(tr.End); t = t.Add(tr.Step) {
		_, served, _, waiting := tr.PerPod(t)
		if waiting > 0 {
			slow += served
		} else {
			fast += served
		}
	}
	mix := testfixture.Distribution{LE: tr.TTFT.LE, Buckets: make([]float64, len(tr.TTFT.LE))}
	for i := range mix.Buckets {
		mix.Buckets[i] = (fast*tr.TTFT.Buckets[i] + slow*tr.SlowTTFT.Buckets[i]) / (fast + slow)
	}
	return mix
}

func prodSchedule(t *testing.T) *schedule.Schedule {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", schedule.Path("prod"))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := schedule.Parse(schedule.Path("prod"), data)
	require.NoError(t, err)
	return s
}

func TestProposalFindsTheKnownPeaks(t *testing.T) {
	tr := testfixture.QwenTraffic()
	p := measure(t)
	prod := prodSchedule(t)
	settings := profile.Settings{ScaledObject: "llm-inference/vllm-qwen", Path: "overlays/prod/scaling.yaml",
		WarmMinimum: 2, MaxReplicas: 8, Threshold: 10, Schedule: prod, GPUsPerReplica: 1, Card: "l40s", PricePerGPUHour: 1.861}
	got, err := profile.Propose(p, settings, profile.Targets{})
	require.NoError(t, err)

	// What the generator says, computed without Prometheus: the weekday morning is the highest
	// rate of an ordinary weekday, paydays the highest rate of the paydays in the window.
	ordinary := time.Date(2026, 11, 16, 0, 0, 0, 0, testfixture.Moscow) // a Monday, no payday that week
	morning, firstHour, lastHour := 0.0, -1, -1
	for h := range 24 {
		r := testfixture.QwenArrivals(ordinary.Add(time.Duration(h) * time.Hour))
		if need(tr, r) > settings.WarmMinimum {
			if firstHour < 0 {
				firstHour = h
			}
			lastHour = h
		}
		morning = math.Max(morning, r)
	}
	payday, paydays := 0.0, []int{}
	for t := tr.Start; t.Before(tr.End); t = t.Add(time.Hour) {
		if testfixture.IsPayday(t) {
			payday = math.Max(payday, testfixture.QwenArrivals(t))
			if len(paydays) == 0 || paydays[len(paydays)-1] != t.Day() {
				paydays = append(paydays, t.Day())
			}
		}
	}
	require.Equal(t, []int{10, 25}, paydays, "the fixture's window holds two paydays")

	// The queue may take the TTFT target less a request's own time to first token (its p50).
	wantThreshold := math.Floor((2.5 - ttftMixture(tr).Quantile(0.5)) * tr.ServedPerPod)
	assert.Equal(t, wantThreshold, got.Threshold.Proposed)
	assert.Contains(t, got.Threshold.Arithmetic, "floor((2.5 s TTFT target − 0.218 s TTFT p50) × 2 req/s a saturated replica finishes) = 4 waiting per replica")
	require.Len(t, got.Peaks, 2)
	weekly, monthly := got.Peaks[0], got.Peaks[1]

	assert.Equal(t, profile.Weekly, weekly.Kind)
	assert.Equal(t, "0 9 * * 1-5", weekly.Cron)
	assert.Equal(t, fmt.Sprintf("0 %d * * 1-5", firstHour), weekly.Cron)
	assert.Equal(t, (time.Duration(lastHour+1-firstHour) * time.Hour).String(), weekly.Duration)
	assert.Equal(t, need(tr, morning), weekly.Warm)
	assert.Contains(t, weekly.Arithmetic, "ceil(6 req/s ÷ (2 req/s a saturated replica × 0.8)) = 4")
	assert.True(t, weekly.LowerBound, "requests waited every weekday morning")
	assert.Equal(t, profile.Covered, weekly.Action, "prod's weekday-morning peak raises vllm-qwen to 4 from 09:00 to 12:00")
	assert.Equal(t, "weekday-morning", weekly.CoveredBy)

	assert.Equal(t, profile.Monthly, monthly.Kind)
	assert.Equal(t, paydays, monthly.DaysOfMonth)
	assert.Equal(t, []string{"2026-11-10", "2026-11-25"}, monthly.Seen)
	assert.Equal(t, "09:00", monthly.At)
	assert.Equal(t, "9h0m0s", monthly.Duration)
	assert.Equal(t, need(tr, payday), monthly.Warm)
	assert.True(t, monthly.LowerBound, "requests waited on paydays")
	assert.Equal(t, profile.Add, monthly.Action, "prod's payday peak raises rag-api, not vllm-qwen")
	assert.Equal(t, []string{"weekday-morning"}, monthly.Overlaps, "paydays' mornings are weekday mornings, on the same field")
	assert.Equal(t, prod.Lead.String(), got.Lead)

	// The entry it proposes joins prod's schedule as a valid peak that fires on the next payday
	// in December, at its warm count.
	data, err := os.ReadFile(filepath.Join("..", "..", "..", schedule.Path("prod")))
	require.NoError(t, err)
	s, err := schedule.Parse(schedule.Path("prod"), append(data, "\n"+monthly.Entry...))
	require.NoError(t, err, monthly.Entry)
	added := s.Peak(monthly.Name)
	require.NotNil(t, added)
	next, ok := added.NextStart(tr.End)
	require.True(t, ok)
	assert.Equal(t, time.Date(2026, 12, 10, 9, 0, 0, 0, testfixture.Moscow).UTC(), next.UTC())
	assert.Equal(t, monthly.Warm, added.Warm)

	wantNow, wantProposed := expectedCost(tr, monthly.Warm)
	require.NotNil(t, got.Cost)
	assert.InDelta(t, wantNow, got.Cost.NowUSDPerWeek, 0.01)
	assert.InDelta(t, wantProposed, got.Cost.ProposedUSDPerWeek, 0.01)

	// Minimums: what an ordinary week's hour needs, at least the warm minimum in business
	// hours (weekdays 09-18) and one replica otherwise.
	for d, day := range got.Minimums {
		for h := range 24 {
			at := ordinary.AddDate(0, 0, d).Add(time.Duration(h) * time.Hour)
			floor := int64(1)
			if d < 5 && h >= 9 && h < 18 {
				floor = settings.WarmMinimum
			}
			want := max(need(tr, testfixture.QwenArrivals(at)), floor)
			assert.Equal(t, want, day.At(h), "%s %02d:00", day.Day, h)
		}
	}
}

// expectedCost is the average week's GPU cost, computed from the generator: every hour runs what
// its load needs, at least the floor (now: 2 all week; proposed: an ordinary week's minimum, and
// on paydays from 09:00 to 18:00 the paydays' warm count).
func expectedCost(tr testfixture.Traffic, paydayWarm int64) (now, proposed float64) {
	for at := tr.Start; at.Before(tr.End); at = at.Add(time.Hour) {
		l := at.In(testfixture.Moscow)
		load := need(tr, testfixture.QwenArrivals(at))
		floor := int64(1)
		if wd := l.Weekday(); wd != time.Saturday && wd != time.Sunday && l.Hour() >= 9 && l.Hour() < 18 {
			floor = 2
		}
		usual := testfixture.QwenArrivals(time.Date(2026, 11, 16+(int(l.Weekday())+6)%7, l.Hour(), 0, 0, 0, testfixture.Moscow))
		prop := max(load, floor, need(tr, usual))
		if testfixture.IsPayday(l) && l.Hour() >= 9 && l.Hour() < 18 {
			prop = max(prop, paydayWarm)
		}
		now += float64(max(load, 2))
		proposed += float64(prop)
	}
	weeks := tr.End.Sub(tr.Start).Hours() / (7 * 24)
	return now / weeks * 1.861, proposed / weeks * 1.861
}

func TestProposalWithoutASchedulePeakAddsBoth(t *testing.T) {
	p := measure(t)
	got, err := profile.Propose(p, profile.Settings{ScaledObject: "llm-inference/vllm-qwen", Path: "overlays/prod/scaling.yaml", WarmMinimum: 2, MaxReplicas: 4}, profile.Targets{})
	require.NoError(t, err)
	require.Len(t, got.Peaks, 2)
	for _, pk := range got.Peaks {
		assert.Equal(t, profile.Add, pk.Action, pk.Name)
		assert.NotEmpty(t, pk.Entry)
	}
	// Paydays fall on weekday mornings: the two proposals raise one field at once.
	assert.Equal(t, []string{"days-10-25-0900 (proposed)"}, got.Peaks[0].Overlaps)
	assert.Equal(t, []string{"weekday-0900 (proposed)"}, got.Peaks[1].Overlaps)
	assert.Contains(t, got.Notes, "peak days-10-25-0900 needs 7 replicas, above the ScaledObject's maximum 4")
}

// Prometheus without the window's first two weeks (a retention shorter than the window): those
// hours are without data, not without traffic. The week's pattern and its peak come from the two
// weeks there are, and the one payday left is the only one seen. With under a week of data there
// is no profile.
func TestProfileOfAWindowPrometheusHoldsOnlyPartOf(t *testing.T) {
	tr := testfixture.QwenTraffic()
	held := tr
	held.Start = tr.Start.AddDate(0, 0, 14)
	prom, src := prometheusOf(t, held)
	src.From = tr.Start
	p, err := profile.Measure(context.Background(), prom, src)
	require.NoError(t, err)
	// The first 14 days.
	require.Len(t, p.HoursWithoutData, 14*24)
	assert.Equal(t, 14*24-1, p.HoursWithoutData[len(p.HoursWithoutData)-1])
	for i := 14 * 24; i < len(p.Hourly); i++ {
		require.InDelta(t, testfixture.QwenArrivals(tr.Start.Add(time.Duration(i)*time.Hour)), p.Hourly[i], 1e-3, "hour %d", i)
	}
	got, err := profile.Propose(p, profile.Settings{ScaledObject: "llm-inference/vllm-qwen", Path: "overlays/prod/scaling.yaml", WarmMinimum: 2, MaxReplicas: 8}, profile.Targets{})
	require.NoError(t, err)
	require.Len(t, got.Peaks, 2)
	assert.Equal(t, "0 9 * * 1-5", got.Peaks[0].Cron)
	assert.Equal(t, need(tr, 6), got.Peaks[0].Warm)
	assert.Equal(t, []string{"2026-11-25"}, got.Peaks[1].Seen)
	for _, d := range got.Minimums[:5] {
		assert.Equal(t, need(tr, 6), d.At(10), "%s 10:00: the morning, not halved by the weeks without data", d.Day)
	}

	src.From, src.To = tr.Start.AddDate(0, 0, 9), tr.Start.AddDate(0, 0, 19) // 10 days, the last 5 held
	_, err = profile.Measure(context.Background(), prom, src)
	require.ErrorContains(t, err, "Prometheus has data for 120 of the window's 240 hours; a profile needs a whole week (168 hours) at least")
}

func TestParseRejectsAProfileThatDisagreesWithItself(t *testing.T) {
	tr := testfixture.QwenTraffic()
	good := &profile.Profile{Model: "qwen", Service: "vllm-qwen", From: tr.Start.UTC(), To: tr.Start.Add(2 * time.Hour).UTC(), TimeZone: "Europe/Moscow",
		Hourly: []float64{1, 2}, Queue: []float64{0, 0}}
	for _, tc := range []struct {
		name string
		edit func(*profile.Profile)
		want string
	}{
		{"as measured", func(*profile.Profile) {}, ""},
		{"a queue of another length", func(p *profile.Profile) { p.Queue = []float64{0} }, "hourlyQueueDepth has 1 hours, hourlyRequestsPerSecond 2"},
		{"a window of other hours", func(p *profile.Profile) { p.To = p.To.Add(time.Hour) }, "is not the 2 hours of hourlyRequestsPerSecond"},
		{"a utilization above 1", func(p *profile.Profile) { p.Plan.Utilization = 5 }, "plan.utilization 5: want a share in (0, 1]"},
		{"a negative rate", func(p *profile.Profile) { p.Hourly[1] = -1 }, "hour 1: a negative rate or queue"},
		{"an hour without data outside", func(p *profile.Profile) { p.HoursWithoutData = []int{2} }, "hoursWithoutData: hour 2 is outside the 2 hours"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *good
			p.Hourly, p.Queue = slices.Clone(good.Hourly), slices.Clone(good.Queue)
			tc.edit(&p)
			data, err := p.Marshal()
			require.NoError(t, err)
			_, err = profile.Parse("qwen.yaml", data)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "qwen.yaml: "), err.Error())
		})
	}
}

// Across the end of summer time (Europe/Berlin, 2026-10-25: a day of 25 hours) the hours are
// counted in local time: the weekday morning is still 09:00-12:00, and the long day makes no peak.
func TestProposalAcrossADaylightSavingChange(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	from := time.Date(2026, 10, 12, 0, 0, 0, 0, berlin) // a Monday
	to := from.AddDate(0, 0, 28)
	p := &profile.Profile{Model: "qwen", Service: "vllm-qwen", From: from.UTC(), To: to.UTC(), TimeZone: "Europe/Berlin",
		TTFT: profile.Quantiles{P50: 0.2, P95: 0.5}, Replica: profile.Replica{RequestsPerSecond: 2, TokensPerSecond: 500, Samples: 100}}
	for at := from; at.Before(to); at = at.Add(time.Hour) {
		l, rate := at.In(berlin), 1.0
		if l.Weekday() != time.Saturday && l.Weekday() != time.Sunday && l.Hour() >= 9 && l.Hour() < 12 {
			rate = 6
		}
		p.Hourly = append(p.Hourly, rate)
	}
	require.Len(t, p.Hourly, 28*24+1, "four weeks with one 25-hour day")
	data, err := p.Marshal()
	require.NoError(t, err)
	p, err = profile.Parse("qwen.yaml", data)
	require.NoError(t, err)
	got, err := profile.Propose(p, profile.Settings{ScaledObject: "llm-inference/vllm-qwen", WarmMinimum: 2}, profile.Targets{})
	require.NoError(t, err)
	require.Len(t, got.Peaks, 1, "%+v", got.Peaks)
	assert.Equal(t, "0 9 * * 1-5", got.Peaks[0].Cron)
	assert.Equal(t, "3h0m0s", got.Peaks[0].Duration)
	assert.Equal(t, int64(4), got.Peaks[0].Warm)
	assert.Equal(t, []profile.HourRanges{{From: 0, To: 9, Replicas: 1}, {From: 9, To: 12, Replicas: 4}, {From: 12, To: 18, Replicas: 2}, {From: 18, To: 24, Replicas: 1}},
		got.Minimums[0].Ranges)
}

// Where vLLM does not count the requests clients gave up, a saturated hour shows what ran, not
// what arrived: the peaks are still found, and said to be lower bounds, with fewer replicas than
// the demand needs.
func TestProfileWhereAbandonedRequestsAreNotCounted(t *testing.T) {
	tr := testfixture.QwenTraffic()
	tr.UncountedAborts = true
	prom, src := prometheusOf(t, tr)
	p, err := profile.Measure(context.Background(), prom, src)
	require.NoError(t, err)
	served := 2 * tr.ServedPerPod // both pods at saturation
	assert.InDelta(t, served, p.Hourly[10], 1e-3, "Monday 10:00: what ran, not the 6 that arrived")
	got, err := profile.Propose(p, profile.Settings{ScaledObject: "llm-inference/vllm-qwen", WarmMinimum: 2, MaxReplicas: 8}, profile.Targets{})
	require.NoError(t, err)
	require.NotEmpty(t, got.Peaks)
	morning := got.Peaks[0]
	assert.Equal(t, "0 9 * * 1-5", morning.Cron)
	assert.True(t, morning.LowerBound)
	assert.Contains(t, morning.Arithmetic, "a lower bound of the demand")
	assert.Less(t, morning.Warm, need(tr, 6), "the demand needs more than the lower bound says")
}
