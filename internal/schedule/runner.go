package schedule

import (
	"context"
	"time"

	"github.com/llm-gitops/platform/internal/gitrepo"
)

// Event is what a Runner did for one firing.
type Event struct {
	Firing Firing
	// Skipped is true for a scale-up missed entirely (the peak had ended): nothing was done.
	Skipped bool
	Result  *Result
	// Err is the error, e.g. a *DeadlineError to alert on.
	Err error
}

// Runner fires a schedule in-process: a timer loop that wakes at the next fire or end time (at
// least every MaxSleep) and runs what Due returns since its last run. Because every commit is
// exactly-once by its trailers, several runners, or a runner restarted with an early LastRun,
// do not commit twice.
type Runner struct {
	Schedule *Schedule
	Remote   *gitrepo.Remote
	Options  FireOptions
	// LastRun is when the runner last ran; zero means now minus the longest lead time plus
	// peak duration, so firings missed while down whose peak has not ended are still made.
	LastRun time.Time
	// MaxSleep bounds a sleep (default 1m), so clock jumps are noticed.
	MaxSleep time.Duration
	// OnEvent is called for every firing run or skipped (may be nil).
	OnEvent func(Event)
}

// Tick runs what is due at now and advances LastRun.
func (r *Runner) Tick(ctx context.Context, now time.Time) []Event {
	if r.LastRun.IsZero() {
		var longest time.Duration
		for _, p := range r.Schedule.Peaks {
			if d := r.Schedule.Lead.Total + p.Duration; d > longest {
				longest = d
			}
		}
		r.LastRun = now.Add(-longest)
	}
	run, skipped := r.Schedule.Due(now, r.LastRun)
	var events []Event
	for _, f := range skipped {
		events = append(events, Event{Firing: f, Skipped: true})
	}
	for _, f := range run {
		ev := Event{Firing: f}
		if f.Phase == ScaleDown {
			ev.Result, ev.Err = r.Schedule.ScaleDown(ctx, r.Remote, f.Peak.Name, f.FireTime, r.Options)
		} else {
			ev.Result, ev.Err = r.Schedule.Fire(ctx, r.Remote, f.Peak.Name, f.FireTime, r.Options)
		}
		events = append(events, ev)
	}
	r.LastRun = now
	if r.OnEvent != nil {
		for _, e := range events {
			r.OnEvent(e)
		}
	}
	return events
}

// Run ticks until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	now := r.Options.Now
	if now == nil {
		now = time.Now
	}
	maxSleep := r.MaxSleep
	if maxSleep <= 0 {
		maxSleep = time.Minute
	}
	for {
		t := now()
		r.Tick(ctx, t)
		sleep := maxSleep
		if next := r.Schedule.NextEvent(t); !next.IsZero() && next.Sub(t) < sleep {
			sleep = next.Sub(t)
		}
		if sleep < time.Second {
			sleep = time.Second
		}
		timer := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}
