package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// Commit trailers.
const (
	TrailerID       = "Schedule-Id"
	TrailerFireTime = "Fire-Time"
	TrailerPhase    = "Schedule-Phase"
	TrailerFrom     = "Schedule-From"
	TrailerTo       = "Schedule-To"
)

// FireOptions are the commit's settings.
type FireOptions struct {
	// Branch to commit to (default main).
	Branch string
	// Author of the commits (default "Schedule Bot <schedule@llm-gitops.invalid>").
	Author gitrepo.Person
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MinRetry is how long a firing that is already past its deadline (fired late) keeps
	// retrying its push (default 1m).
	MinRetry time.Duration
	Backoff  gitrepo.Backoff
}

func (o FireOptions) withDefaults() FireOptions {
	if o.Branch == "" {
		o.Branch = "main"
	}
	if o.Author.Name == "" || o.Author.Email == "" {
		o.Author = gitrepo.Person{Name: "Schedule Bot", Email: "schedule@llm-gitops.invalid"}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinRetry <= 0 {
		o.MinRetry = time.Minute
	}
	return o
}

// Result is the outcome of a scale-up or scale-down.
type Result struct {
	Firing Firing
	Phase  Phase
	// Commit is the pushed commit, empty when nothing was committed (NoChange).
	Commit   string
	NoChange bool
	// Reason says why nothing was committed, or how the scale-down was made.
	Reason string
	// From and To are the field's values before and after.
	From, To int64
	// File is the file the commit changed: the target file, or a pinned env's Application file
	// (its kustomize patches); Line the changed line there.
	File     string
	Line     int
	Attempts int
	// PushedAt is when the push was confirmed.
	PushedAt time.Time
}

// DeadlineError is returned when a scale-up could not land before the peak's start minus the
// cold start: the replicas will not be ready in time. Landed tells whether the commit was
// pushed anyway (late, Result filled) or not at all (Err holds the push error). A daemon
// alerts on it.
type DeadlineError struct {
	Peak     string
	FireTime time.Time
	// Deadline = peak start − cold start.
	Deadline time.Time
	Landed   bool
	PushedAt time.Time
	Err      error
}

func (e *DeadlineError) Error() string {
	if e.Landed {
		return fmt.Sprintf("peak %s (fire time %s): scale-up pushed at %s, %s after the deadline %s (peak start − cold start): replicas will be late",
			e.Peak, e.FireTime.Format(time.RFC3339), e.PushedAt.Format(time.RFC3339), e.PushedAt.Sub(e.Deadline).Round(time.Second), e.Deadline.Format(time.RFC3339))
	}
	return fmt.Sprintf("peak %s (fire time %s): scale-up could not be pushed before the deadline %s (peak start − cold start): %v",
		e.Peak, e.FireTime.Format(time.RFC3339), e.Deadline.Format(time.RFC3339), e.Err)
}

func (e *DeadlineError) Unwrap() error { return e.Err }

// fireTimeValue is the Fire-Time trailer value: RFC 3339 in UTC, so it does not depend on
// the zone the fire time was computed or typed in.
func fireTimeValue(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func trailers(f Firing, phase Phase, from, to int64) []gitrepo.Trailer {
	return []gitrepo.Trailer{
		{Key: TrailerID, Value: f.Peak.Name},
		{Key: TrailerFireTime, Value: fireTimeValue(f.FireTime)},
		{Key: TrailerPhase, Value: string(phase)},
		{Key: TrailerFrom, Value: strconv.FormatInt(from, 10)},
		{Key: TrailerTo, Value: strconv.FormatInt(to, 10)},
	}
}

// history finds where peak p's firings write at snap and the commits that touched it.
func (s *Schedule) history(ctx context.Context, snap *gitrepo.Snapshot, p *Peak) (site, []gitrepo.Commit, error) {
	st, err := s.siteOf(snap, p)
	if err != nil {
		return site{}, nil, err
	}
	commits, err := snap.Log(ctx, st.paths(p)...)
	return st, commits, err
}

// findFiring returns the newest commit of the firing (any phase when phase is ""), or nil.
func findFiring(commits []gitrepo.Commit, f Firing, phase Phase) *gitrepo.Commit {
	want := []gitrepo.Trailer{{Key: TrailerID, Value: f.Peak.Name}, {Key: TrailerFireTime, Value: fireTimeValue(f.FireTime)}}
	for i := range commits {
		c := gitrepo.FindTrailers(commits[i:i+1], want...)
		if c == nil {
			continue
		}
		if phase == "" {
			return c
		}
		got, _ := c.Trailer(TrailerPhase)
		if got == "" {
			got = string(ScaleUp)
		}
		if got == string(phase) {
			return c
		}
	}
	return nil
}

func local(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04 MST")
}

// message is the scale-up commit message.
func (f Firing) message(from, to int64) string {
	p := f.Peak
	var b strings.Builder
	fmt.Fprintf(&b, "schedule: scale %s/%s up for peak %s (%d → %d)\n\n", p.Target.Kind, p.Target.Name, p.Name, from, to)
	fmt.Fprintf(&b, "Peak %s: %s to %s (%s, %s).\n", p.Name, local(f.Start, p.Location), local(f.End, p.Location), p.TimeZone, p.Duration)
	fmt.Fprintf(&b, "Fire time %s = peak start − lead time %s:\n", local(f.FireTime, p.Location), f.Lead.Total)
	fmt.Fprintf(&b, "  Argo CD sync delay %s\n", f.Lead.ArgoSyncDelay)
	fmt.Fprintf(&b, "  cold start         %s\n", f.Lead.ColdStart.Total)
	for _, s := range f.Lead.ColdStart.Stages {
		fmt.Fprintf(&b, "    %-18s %s (%s)\n", s.Name, s.Duration, s.Detail)
	}
	fmt.Fprintf(&b, "  margin             %s\n", f.Lead.Margin)
	fmt.Fprintf(&b, "Change: %s %d → %d.\n", p.Target, from, to)
	return b.String()
}

// errRetryMessage asks Fire to rebuild the message: the head's value differs from the one the
// message was written with.
var errRetryMessage = errors.New("value changed: rebuild message")

// Fire commits the scale-up of the occurrence of peak whose fire time is fireTime: it sets the
// target field to the peak's Warm value, in a commit with trailers Schedule-Id, Fire-Time and
// Schedule-Phase: scale-up. Nothing is committed when the field is already at or above Warm,
// or when the history already has a commit of this firing (exactly once, checked on the head
// each attempt builds on). Pushes are retried until peak start − cold start (or MinRetry from
// now when later than that); missing that deadline gives a *DeadlineError.
func (s *Schedule) Fire(ctx context.Context, remote *gitrepo.Remote, peak string, fireTime time.Time, o FireOptions) (*Result, error) {
	p := s.Peak(peak)
	if p == nil {
		return nil, fmt.Errorf("schedule %s: no peak %q", s.File, peak)
	}
	o = o.withDefaults()
	f := s.FiringAt(p, fireTime)
	deadline := f.Start.Add(-f.Lead.ColdStart.Total)
	retryUntil := deadline
	if min := o.Now().Add(o.MinRetry); retryUntil.Before(min) {
		retryUntil = min
	}
	res := &Result{Firing: f, Phase: ScaleUp, To: p.Warm}
	known := int64(-1) // the value the message was written with
	for round := 0; round < 5; round++ {
		var seen int64
		req := gitrepo.UpdateRequest{
			Branch: o.Branch, Author: o.Author, Deadline: retryUntil, Backoff: o.Backoff,
			Message:  f.message(known, p.Warm),
			Trailers: trailers(f, ScaleUp, known, p.Warm),
			Change: func(snap *gitrepo.Snapshot) (map[string][]byte, error) {
				res.NoChange, res.Reason = false, ""
				st, commits, err := s.history(ctx, snap, p)
				if err != nil {
					return nil, err
				}
				if c := findFiring(commits, f, ""); c != nil {
					res.NoChange, res.Reason = true, "already fired in "+c.Hash
					return nil, nil
				}
				out, from, line, err := st.set(snap, p.Target, p.Warm)
				if err != nil {
					return nil, err
				}
				seen, res.From, res.Line, res.File = from, from, line, st.file
				if from >= p.Warm {
					res.NoChange, res.Reason = true, fmt.Sprintf("%s is already %d (≥ %d)", p.Target.Field, from, p.Warm)
					return nil, nil
				}
				if from != known {
					return nil, errRetryMessage
				}
				return map[string][]byte{st.file: out}, nil
			},
		}
		r, err := remote.Update(ctx, req)
		res.Attempts += r.Attempts
		if errors.Is(err, errRetryMessage) {
			known = seen
			continue
		}
		var pe *gitrepo.PushError
		if errors.As(err, &pe) {
			return res, &DeadlineError{Peak: p.Name, FireTime: f.FireTime, Deadline: deadline, Err: err}
		}
		if err != nil {
			return res, fmt.Errorf("peak %s: scale-up: %w", p.Name, err)
		}
		if r.NoChange {
			res.NoChange = true
			if res.Reason == "" {
				res.Reason = "no change"
			}
			return res, nil
		}
		res.Commit, res.PushedAt = r.Commit, o.Now()
		if res.PushedAt.After(deadline) {
			return res, &DeadlineError{Peak: p.Name, FireTime: f.FireTime, Deadline: deadline, Landed: true, PushedAt: res.PushedAt}
		}
		return res, nil
	}
	return res, fmt.Errorf("peak %s: the target kept changing while firing", p.Name)
}
