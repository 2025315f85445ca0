package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
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
	// Reload, when set, is asked before each tick for the schedule as Git has it now (nil: no
	// change), so an edit of schedule.yaml takes effect without a restart.
	Reload func() *Schedule
	// Wake, when set, ends a sleep early (a new Git revision was fetched): Reload is asked at once.
	Wake <-chan struct{}
	// RetryEvery is how often a failed firing is tried again (default 30s): a scale-up until its
	// peak ends (then it is reported missed, never made late), a scale-down until it lands.
	RetryEvery time.Duration

	failed   []Firing // firings that failed, to try again
	lastErrs []error  // their last errors
}

// MissedError says a scale-up was never committed before its peak ended: on-call must know
// the peak ran cold.
type MissedError struct {
	Peak       string
	Start, End time.Time
	Last       error // the last attempt's error
}

func (e *MissedError) Error() string {
	return fmt.Sprintf("peak %s (%s–%s) missed: the scale-up could not be committed before it ended: %v",
		e.Peak, e.Start.Format(time.RFC3339), e.End.Format("15:04"), e.Last)
}

func (e *MissedError) Unwrap() error { return e.Last }

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
	// What failed before goes first, in order; a scale-up whose peak has ended is missed.
	retry, lastErrs := r.failed, r.lastErrs
	r.failed, r.lastErrs = nil, nil
	for i, f := range retry {
		if f.Phase == ScaleUp && !now.Before(f.End) {
			events = append(events, Event{Firing: f, Skipped: true, Err: &MissedError{Peak: f.Peak.Name, Start: f.Start, End: f.End, Last: lastErrs[i]}})
			continue
		}
		run = append([]Firing{f}, run...)
	}
	sortFirings(run, Firing.at)
	for _, f := range run {
		ev := Event{Firing: f}
		if f.Phase == ScaleDown {
			ev.Result, ev.Err = r.Schedule.ScaleDown(ctx, r.Remote, f.Peak.Name, f.FireTime, r.Options)
		} else {
			ev.Result, ev.Err = r.Schedule.Fire(ctx, r.Remote, f.Peak.Name, f.FireTime, r.Options)
		}
		var late *DeadlineError
		landed := errors.As(ev.Err, &late) && late.Landed // committed, only after its deadline
		if ev.Err != nil && !landed {
			r.failed = append(r.failed, f)
			r.lastErrs = append(r.lastErrs, ev.Err)
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
		if r.Reload != nil {
			if s := r.Reload(); s != nil {
				r.Schedule = s
				// Firings still failing whose peak the new schedule dropped are not retried.
				var failed []Firing
				var errs []error
				for i, f := range r.failed {
					if slices.ContainsFunc(s.Peaks, func(p *Peak) bool { return p.Name == f.Peak.Name }) {
						failed, errs = append(failed, f), append(errs, r.lastErrs[i])
					}
				}
				r.failed, r.lastErrs = failed, errs
				// Look back over the new schedule's whole window again, as at start: a peak added
				// less than its lead time before it begins still fires (late, before the peak), and
				// what was already committed is recognised by its trailer and not committed twice.
				r.LastRun = time.Time{}
			}
		}
		t := now()
		r.Tick(ctx, t)
		sleep := maxSleep
		if next := r.Schedule.NextEvent(t); !next.IsZero() && next.Sub(t) < sleep {
			sleep = next.Sub(t)
		}
		if len(r.failed) > 0 {
			retry := r.RetryEvery
			if retry <= 0 {
				retry = 30 * time.Second
			}
			sleep = min(sleep, retry)
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
		case <-r.Wake:
			timer.Stop()
		}
	}
}
