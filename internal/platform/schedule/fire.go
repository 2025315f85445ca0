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

// ScaleDown undoes the scale-up of the occurrence of peak fired at fireTime: it reverts the
// scale-up commit when no later commit touched its lines (git's revert message, trailers
// Schedule-Id, Fire-Time, Schedule-Phase: scale-down); otherwise it commits the previous
// value back, but only when the field still holds the value the scale-up set (a field
// changed since by someone else is left alone). Nothing happens when the firing committed
// nothing or was already scaled down.
func (s *Schedule) ScaleDown(ctx context.Context, remote *gitrepo.Remote, peak string, fireTime time.Time, o FireOptions) (*Result, error) {
	p := s.Peak(peak)
	if p == nil {
		return nil, fmt.Errorf("schedule %s: no peak %q", s.File, peak)
	}
	o = o.withDefaults()
	f := s.FiringAt(p, fireTime)
	res := &Result{Firing: f, Phase: ScaleDown}
	var up *gitrepo.Commit
	// One read of the head (no commit) to find the scale-up.
	pinned := false
	composedWhy := "" // why the value restored is not the one the scale-up started from
	inspect := func(snap *gitrepo.Snapshot) (map[string][]byte, error) {
		up = nil
		res.NoChange, res.Reason = false, ""
		st, commits, err := s.history(ctx, snap, p)
		if err != nil {
			return nil, err
		}
		pinned = st.app != ""
		if c := findFiring(commits, f, ScaleDown); c != nil {
			res.NoChange, res.Reason = true, "already scaled down in "+c.Hash
			return nil, nil
		}
		up = findFiring(commits, f, ScaleUp)
		if up == nil {
			res.NoChange, res.Reason = true, "no scale-up commit for this firing"
			return nil, nil
		}
		from, _ := up.Trailer(TrailerFrom)
		to, _ := up.Trailer(TrailerTo)
		if res.To, err = strconv.ParseInt(from, 10, 64); err != nil {
			return nil, fmt.Errorf("scale-up %s: bad %s trailer %q", up.Hash, TrailerFrom, from)
		}
		if res.From, err = strconv.ParseInt(to, 10, 64); err != nil {
			return nil, fmt.Errorf("scale-up %s: bad %s trailer %q", up.Hash, TrailerTo, to)
		}
		if !pinned { // a pinned env's scale-down removes its patch: the pin's value comes back
			res.To, composedWhy = s.composed(commits, p, f, up, res.To, o.Now())
		}
		return nil, nil
	}
	deadline := o.Now().Add(o.MinRetry)
	r, err := remote.Update(ctx, gitrepo.UpdateRequest{Branch: o.Branch, Author: o.Author, Message: "inspect", Change: inspect, Deadline: deadline, Backoff: o.Backoff})
	res.Attempts += r.Attempts
	if err != nil {
		return res, fmt.Errorf("peak %s: scale-down: %w", p.Name, err)
	}
	if up == nil {
		return res, nil
	}
	tr := trailers(f, ScaleDown, res.From, res.To)
	var why string
	if composedWhy != "" {
		// Another peak of the field was part of the value the scale-up started from: a revert
		// would restore that peak's raise after it ended.
		why = composedWhy
	} else if pinned {
		// A pinned env's patches share their kustomize: and patches: lines: a revert would leave
		// them empty, or conflict with another peak's patch. Remove this peak's patch instead.
		why = "The scale-up " + up.Hash + " was a patch of the env's Application: it is removed,\nand the env runs its pinned value again.\n"
	} else {
		rv, err := remote.Revert(ctx, up.Hash, gitrepo.RevertRequest{Branch: o.Branch, Author: o.Author, Trailers: tr, Deadline: deadline, Backoff: o.Backoff})
		res.Attempts += rv.Attempts
		var conflict *gitrepo.RevertConflictError
		switch {
		case err == nil:
			res.Commit, res.NoChange, res.PushedAt = rv.Commit, rv.NoChange, o.Now()
			res.Reason = "reverted " + up.Hash
			if rv.NoChange {
				res.Reason = "scale-up " + up.Hash + " already undone"
			}
			return res, nil
		case !errors.As(err, &conflict):
			return res, fmt.Errorf("peak %s: scale-down: revert %s: %w", p.Name, up.Hash, err)
		}
		// Later commits touched those lines: restore the previous value if the field still holds ours.
		why = fmt.Sprintf("The scale-up %s cannot be reverted (%v),\nso the previous value is restored.\n", up.Hash, conflict)
	}
	msg := fmt.Sprintf("schedule: scale %s/%s down after peak %s (%d → %d)\n\n"+
		"Peak %s ended at %s. %s"+
		"Change: %s %d → %d.\n",
		p.Target.Kind, p.Target.Name, p.Name, res.From, res.To, p.Name, local(f.End, p.Location), why, p.Target, res.From, res.To)
	r, err = remote.Update(ctx, gitrepo.UpdateRequest{Branch: o.Branch, Author: o.Author, Message: msg, Trailers: tr, Deadline: deadline, Backoff: o.Backoff,
		Change: func(snap *gitrepo.Snapshot) (map[string][]byte, error) {
			res.NoChange, res.Reason = false, ""
			st, commits, err := s.history(ctx, snap, p)
			if err != nil {
				return nil, err
			}
			if c := findFiring(commits, f, ScaleDown); c != nil {
				res.NoChange, res.Reason = true, "already scaled down in "+c.Hash
				return nil, nil
			}
			if _, ok := snap.Files[st.file]; !ok {
				res.NoChange, res.Reason = true, "target file "+st.file+" is gone"
				return nil, nil
			}
			cur, err := st.current(snap, p.Target)
			if err != nil {
				return nil, err
			}
			if cur != res.From {
				res.NoChange, res.Reason = true, fmt.Sprintf("%s was changed to %d since the scale-up: left alone", p.Target.Field, cur)
				return nil, nil
			}
			out, line, err := st.restore(snap, p.Target, res.To)
			if err != nil {
				return nil, err
			}
			res.Line, res.File = line, st.file
			return map[string][]byte{st.file: out}, nil
		}})
	res.Attempts += r.Attempts
	if err != nil {
		return res, fmt.Errorf("peak %s: scale-down: %w", p.Name, err)
	}
	res.Commit, res.PushedAt = r.Commit, o.Now()
	if r.NoChange {
		res.NoChange = true
	} else {
		res.Reason = fmt.Sprintf("restored %d (%s)", res.To, strings.TrimSpace(strings.ReplaceAll(why, "\n", " ")))
	}
	return res, nil
}

// composed is the value a scale-down of p (its firing f) restores when other peaks raise the
// same field: what p's scale-up started from, unless that was the raise of another peak q whose
// raise was in effect when p fired (q's scale-up older than p's, its window holding p's fire
// time) and which has ended since (its own scale-down left the field alone, as p had changed
// it): then what q's scale-up started from, and so on back. It never goes under the warm count of
// another peak raising the field now whose scale-up committed (one that committed nothing, the
// field being higher, has no scale-down to lower it again). why says it when the value is not
// the one p's scale-up started from.
func (s *Schedule) composed(commits []gitrepo.Commit, p *Peak, f Firing, up *gitrepo.Commit, started int64, now time.Time) (value int64, why string) {
	older := commits
	for i := range commits {
		if commits[i].Hash == up.Hash {
			older = commits[i+1:]
			break
		}
	}
	base, held := started, f.FireTime // the value to follow back, and when it was in effect
	var ended []string
	for i := 0; i < len(older); i++ { // newest first: each link is older than the one before
		c := older[i]
		id, _ := c.Trailer(TrailerID)
		phase, _ := c.Trailer(TrailerPhase)
		q := s.Peak(id)
		if q == nil || q == p || phase != string(ScaleUp) || !sameField(q.Target, p.Target) {
			continue
		}
		to, err1 := strconv.ParseInt(trailer(c, TrailerTo), 10, 64)
		from, err2 := strconv.ParseInt(trailer(c, TrailerFrom), 10, 64)
		fired, err3 := time.Parse(time.RFC3339, trailer(c, TrailerFireTime))
		if err1 != nil || err2 != nil || err3 != nil || to != base {
			continue
		}
		qf := s.FiringAt(q, fired)
		if held.Before(qf.FireTime) || !held.Before(qf.End) { // q's raise was not in effect then
			continue
		}
		if now.Before(qf.End) { // q raises it still: its own scale-down gives it back
			break
		}
		base, held = from, qf.FireTime
		ended = append(ended, fmt.Sprintf("%s (%d → %d, ended)", q.Name, from, to))
	}
	value = base
	var active []string
	for _, q := range s.Peaks {
		if q == p || !sameField(q.Target, p.Target) {
			continue
		}
		qf, ok := s.Current(q, now)
		if ok && !now.Before(qf.FireTime) && now.Before(qf.End) && q.Warm > value && findFiring(commits, qf, ScaleUp) != nil {
			value = q.Warm
			active = append(active, fmt.Sprintf("%s (warm %d, until %s)", q.Name, q.Warm, local(qf.End, q.Location)))
		}
	}
	if value == started {
		return value, ""
	}
	why = fmt.Sprintf("The scale-up %s started from %d, which other peaks of the field set:", up.Hash, started)
	if len(ended) > 0 {
		why += " " + strings.Join(ended, ", ") + " gave it back to " + strconv.FormatInt(base, 10) + ";"
	}
	if len(active) > 0 {
		why += " " + strings.Join(active, ", ") + " still raises it;"
	}
	return value, why + fmt.Sprintf(" so %d is restored.\n", value)
}

// trailer is c's value of key, "" when it has none.
func trailer(c gitrepo.Commit, key string) string { v, _ := c.Trailer(key); return v }

// sameField says two targets are one field of one object in one file.
func sameField(a, b Target) bool {
	return a.Path == b.Path && a.Kind == b.Kind && a.Name == b.Name && a.Namespace == b.Namespace && a.Field == b.Field
}
