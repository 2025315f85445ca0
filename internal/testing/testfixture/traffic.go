package testfixture

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Traffic is a vLLM model's load over a window, from a known arrival rate, written as the series
// the platform's ServiceMonitor `vllm` scrapes from each pod. Each pod serves at most
// ServedPerPod requests a second; what arrives beyond that waits (num_requests_waiting) and is
// aborted (request_success_total{finished_reason="abort"}), so finished requests of every reason
// add up to the arrivals.
type Traffic struct {
	Model, Service, Namespace string
	// Pods are the pods' names; arrivals are shared evenly among them.
	Pods []string
	// Start and End bound the window; Step is the scrape interval.
	Start, End time.Time
	Step       time.Duration
	// Arrivals is the arrival rate in requests a second at a time.
	Arrivals func(time.Time) float64
	// ServedPerPod is a pod's throughput at saturation, in requests a second.
	ServedPerPod float64
	// AbandonAfter is how long a waiting request waits before its client gives up: a pod's
	// queue is its excess arrivals × AbandonAfter.
	AbandonAfter time.Duration
	// UncountedAborts leaves the requests clients gave up out of request_success_total, as
	// vLLM releases that do not count them do: what finished is then less than what arrived.
	UncountedAborts bool
	// MaxNumSeqs is the batch a saturated pod runs (num_requests_running).
	MaxNumSeqs float64
	// Prompt and Response are the token length distributions, TTFT the time to first token
	// (seconds) of a pod with no queue and SlowTTFT of one with a queue.
	Prompt, Response, TTFT, SlowTTFT Distribution
	// E2E is the request latency (seconds).
	E2E Distribution
}

// Distribution is a histogram's shape: Buckets[i] of the observations are at most LE[i]
// (cumulative, the last one 1), and Mean is their mean.
type Distribution struct {
	LE, Buckets []float64
	Mean        float64
}

// Quantile is histogram_quantile's answer for the distribution: linear interpolation inside the
// bucket that holds q, the first bucket starting at 0.
func (d Distribution) Quantile(q float64) float64 {
	lower, below := 0.0, 0.0
	for i, le := range d.LE {
		if d.Buckets[i] >= q {
			return lower + (le-lower)*(q-below)/(d.Buckets[i]-below)
		}
		lower, below = le, d.Buckets[i]
	}
	return math.NaN()
}

// PerPod is what one pod gets and does at t: arrivals, served and aborted requests a second,
// and its queue.
func (tr Traffic) PerPod(t time.Time) (arrivals, served, aborted, waiting float64) {
	arrivals = tr.Arrivals(t) / float64(len(tr.Pods))
	served = math.Min(arrivals, tr.ServedPerPod)
	aborted = arrivals - served
	waiting = aborted * tr.AbandonAfter.Seconds()
	return arrivals, served, aborted, waiting
}

// WriteOpenMetrics writes the series as OpenMetrics text, one metric family after another, each
// series' samples in time order, timestamps in seconds, ending in "# EOF": the input of
// `promtool tsdb create-blocks-from openmetrics`. A counter's value at t adds the step that ends at
// t at the rate of the step's start, so increase() over whole hours is exact.
func (tr Traffic) WriteOpenMetrics(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	steps := int(tr.End.Sub(tr.Start) / tr.Step)
	dt := tr.Step.Seconds()
	at := func(i int) time.Time { return tr.Start.Add(time.Duration(i) * tr.Step) }
	labels := func(pod string) string {
		return fmt.Sprintf(`model_name="%s",namespace="%s",pod="%s",service="%s"`, tr.Model, tr.Namespace, pod, tr.Service)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	ts := func(i int) string { return strconv.FormatInt(at(i).Unix(), 10) }

	counter := func(name, extra string, per func(time.Time) float64) {
		fmt.Fprintf(bw, "# TYPE %s counter\n", name)
		for _, pod := range tr.Pods {
			total := 0.0
			for i := 0; i <= steps; i++ {
				if i > 0 {
					total += per(at(i-1)) * dt
				}
				fmt.Fprintf(bw, "%s_total{%s%s} %s %s\n", name, labels(pod), extra, f(total), ts(i))
			}
		}
	}
	gauge := func(name string, v func(time.Time) float64) {
		fmt.Fprintf(bw, "# TYPE %s gauge\n", name)
		for _, pod := range tr.Pods {
			for i := 0; i <= steps; i++ {
				fmt.Fprintf(bw, "%s{%s} %s %s\n", name, labels(pod), f(v(at(i))), ts(i))
			}
		}
	}
	// histogram observes each finished request (served and aborted alike for lengths of prompts;
	// served only for the others) with the distribution dist gives at t.
	histogram := func(name string, count func(time.Time) float64, dist func(time.Time) Distribution) {
		fmt.Fprintf(bw, "# TYPE %s histogram\n", name)
		for _, pod := range tr.Pods {
			n, sum := 0.0, 0.0
			buckets := make([]float64, len(dist(at(0)).LE))
			for i := 0; i <= steps; i++ {
				if i > 0 {
					c, d := count(at(i-1))*dt, dist(at(i-1))
					n += c
					sum += c * d.Mean
					for b := range buckets {
						buckets[b] += c * d.Buckets[b]
					}
				}
				d := dist(at(i))
				for b, le := range d.LE {
					fmt.Fprintf(bw, "%s_bucket{%s,le=\"%s\"} %s %s\n", name, labels(pod), f(le), f(buckets[b]), ts(i))
				}
				fmt.Fprintf(bw, "%s_bucket{%s,le=\"+Inf\"} %s %s\n", name, labels(pod), f(n), ts(i))
				fmt.Fprintf(bw, "%s_count{%s} %s %s\n", name, labels(pod), f(n), ts(i))
				fmt.Fprintf(bw, "%s_sum{%s} %s %s\n", name, labels(pod), f(sum), ts(i))
			}
		}
	}
	served := func(t time.Time) float64 { _, s, _, _ := tr.PerPod(t); return s }
	aborted := func(t time.Time) float64 { _, _, a, _ := tr.PerPod(t); return a }
	arrived := func(t time.Time) float64 { a, _, _, _ := tr.PerPod(t); return a }
	waiting := func(t time.Time) float64 { _, _, _, q := tr.PerPod(t); return q }
	running := func(t time.Time) float64 { return math.Round(tr.MaxNumSeqs * served(t) / tr.ServedPerPod) }
	fixed := func(d Distribution) func(time.Time) Distribution { return func(time.Time) Distribution { return d } }

	fmt.Fprintf(bw, "# TYPE vllm:request_success counter\n")
	for _, pod := range tr.Pods {
		for _, reason := range []struct {
			name string
			per  func(time.Time) float64
		}{{"stop", served}, {"abort", aborted}} {
			if reason.name == "abort" && tr.UncountedAborts {
				continue
			}
			total := 0.0
			for i := 0; i <= steps; i++ {
				if i > 0 {
					total += reason.per(at(i-1)) * dt
				}
				fmt.Fprintf(bw, "vllm:request_success_total{%s,finished_reason=\"%s\"} %s %s\n", labels(pod), reason.name, f(total), ts(i))
			}
		}
	}
	counter("vllm:prompt_tokens", "", func(t time.Time) float64 { return arrived(t) * tr.Prompt.Mean })
	counter("vllm:generation_tokens", "", func(t time.Time) float64 { return served(t) * tr.Response.Mean })
	gauge("vllm:num_requests_running", running)
	gauge("vllm:num_requests_waiting", waiting)
	gauge("vllm:kv_cache_usage_perc", func(t time.Time) float64 { return 0.9 * running(t) / tr.MaxNumSeqs })
	histogram("vllm:request_prompt_tokens", arrived, fixed(tr.Prompt))
	histogram("vllm:request_generation_tokens", served, fixed(tr.Response))
	histogram("vllm:time_to_first_token_seconds", served, func(t time.Time) Distribution {
		if waiting(t) > 0 {
			return tr.SlowTTFT
		}
		return tr.TTFT
	})
	histogram("vllm:e2e_request_latency_seconds", served, fixed(tr.E2E))
	fmt.Fprintln(bw, "# EOF")
	return bw.Flush()
}

// Moscow is the platform's time zone (UTC+3 all year), fixed so the fixture needs no tzdata.
var Moscow = time.FixedZone("Europe/Moscow", 3*3600)

// QwenTraffic is four weeks of qwen in prod with two known peaks, on two pods that serve 2
// requests a second each:
//   - weekday mornings, 09:00-12:00 Moscow time: 6 requests a second (2.5 the rest of the
//     working day, 1.5 from 07:00, 1 in the evening, 0.5 at night; weekends 1 by day);
//   - paydays, the 10th and the 25th (moved to the previous weekday from a weekend),
//     09:00-18:00: 4 requests a second more.
//
// The window is Monday 2026-11-02 to Monday 2026-11-30, Moscow time, scraped every 5 minutes.
func QwenTraffic() Traffic {
	start := time.Date(2026, 11, 2, 0, 0, 0, 0, Moscow)
	return Traffic{
		Model: "qwen", Service: "vllm-qwen", Namespace: "llm-inference",
		Pods:  []string{"vllm-qwen-7c9d6b5f4-abcde", "vllm-qwen-7c9d6b5f4-fghij"},
		Start: start, End: start.AddDate(0, 0, 28), Step: 5 * time.Minute,
		Arrivals: QwenArrivals, ServedPerPod: 2, AbandonAfter: 30 * time.Second, MaxNumSeqs: 15,
		Prompt:   Distribution{LE: []float64{200, 500, 1000, 2000, 5000}, Buckets: []float64{0.05, 0.25, 0.6, 1, 1}, Mean: 900},
		Response: Distribution{LE: []float64{100, 200, 500, 1000, 2000}, Buckets: []float64{0.2, 0.5, 0.96, 1, 1}, Mean: 260},
		TTFT:     Distribution{LE: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10}, Buckets: []float64{0.3, 0.8, 0.97, 1, 1, 1, 1}, Mean: 0.2},
		SlowTTFT: Distribution{LE: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10}, Buckets: []float64{0, 0.05, 0.2, 0.4, 0.7, 0.95, 1}, Mean: 2.4},
		E2E:      Distribution{LE: []float64{1, 5, 10, 20, 40, 80}, Buckets: []float64{0.02, 0.3, 0.7, 0.95, 1, 1}, Mean: 9},
	}
}

// QwenArrivals is QwenTraffic's arrival rate, requests a second, at t.
func QwenArrivals(t time.Time) float64 {
	l := t.In(Moscow)
	h := l.Hour()
	var r float64
	switch wd := l.Weekday(); {
	case wd == time.Saturday || wd == time.Sunday:
		r = 0.5
		if h >= 8 && h < 22 {
			r = 1
		}
	case h < 7 || h >= 22:
		r = 0.5
	case h < 9:
		r = 1.5
	case h < 12:
		r = 6
	case h < 19:
		r = 2.5
	default:
		r = 1
	}
	if IsPayday(l) && h >= 9 && h < 18 {
		r += 4
	}
	return r
}

// IsPayday says whether t's date is a payday: the 10th or the 25th, or the Friday before when
// that is a weekend.
func IsPayday(t time.Time) bool {
	for _, day := range []int{10, 25} {
		d := time.Date(t.Year(), t.Month(), day, 0, 0, 0, 0, t.Location())
		for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
			d = d.AddDate(0, 0, -1)
		}
		if d.YearDay() == t.YearDay() && d.Year() == t.Year() {
			return true
		}
	}
	return false
}
