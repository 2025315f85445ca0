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
