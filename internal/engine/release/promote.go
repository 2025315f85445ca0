package release

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// Trailers of a promotion commit.
const (
	TrailerFrom     = "Promote-From"
	TrailerTo       = "Promote-To"
	TrailerRevision = "Promote-Revision"
	// TrailerForced carries the reason a promotion was made past the violations auditor check
	// found in it.
	TrailerForced = "Promote-Forced"
	// TrailerForcedPast names the violations a forced promotion went past, "rule object" each,
	// separated by "; ": auditor check reports them as forced, not failing, on the promotion's
	// pull request.
	TrailerForcedPast = "Promote-Forced-Past"
)

// Bot is the default author of promotion commits.
var Bot = gitrepo.Person{Name: "auditor-bot", Email: "auditor@llm-platform.local"}

// Request asks to move To's pin to From's release.
type Request struct {
	From, To string
	// Revision to promote instead of From's release (a commit of the branch's history).
	Revision string
	// Branch holding the release files (default main).
	Branch string
	// SkipStage allows a source other than the stage before To (Order), or a Revision.
	SkipStage bool
	// Backwards allows moving To to an ancestor of what it runs (a rollback is better done by
	// reverting the promotion commit).
	Backwards bool
	// ReviewBranch, when set, is where the promotion commit is pushed, made on Branch's head, for
	// a pull request into Branch; empty commits on Branch itself.
	ReviewBranch string
	// Forced is the reason the promotion goes ahead past the violations it has (empty: none
	// were overridden); it is a trailer of the commit, and the ledger's records of it carry it.
	Forced string
	// ForcedPast are the violations Forced goes past, one "rule object" each; ForcedMessages
	// say them in full, for the commit message.
	ForcedPast, ForcedMessages []string
	// Checked, when set, is the branch's tree the promotion was checked at: a branch that moved
	// since in anything but a model ledger or another env's release file is refused, as the
	// check no longer holds.
	Checked *gitrepo.Snapshot
	// Author defaults to Bot.
	Author   gitrepo.Person
	Deadline time.Time
	Backoff  gitrepo.Backoff
}

// Order is the promotion path: each env takes what the one before it runs.
var Order = []string{Following, "staging", "prod"}

// previous returns the env before env on the promotion path; "" when env is not on it or first.
func previous(env string) string {
	for i, e := range Order {
		if e == env && i > 0 {
			return Order[i-1]
		}
	}
	return ""
}

// Plan is a promotion resolved against the branch head: To moves from Old to New.
type Plan struct {
	From, To string
	// Head is the branch head the plan was made at.
	Head string
	// Old is To's pinned commit; New the commit it moves to.
	Old, New string
	// Backwards says New is an ancestor of Old: the promotion moves To back.
	Backwards bool
}

// NoChange says To already runs New.
func (p Plan) NoChange() bool { return p.Old == p.New }

// Resolve makes the plan: From's release (its pin, or the branch head when From follows the
// branch) or the requested revision, which must be on the branch's history, becomes To's pin.
func Resolve(repo *gitrepo.Repo, req Request) (Plan, error) {
	if req.Branch == "" {
		req.Branch = "main"
	}
	if req.To == "" || (req.From == "" && req.Revision == "") {
		return Plan{}, fmt.Errorf("promote: name the env to promote to and the env (or revision) to promote from")
	}
	if req.From == req.To {
		return Plan{}, fmt.Errorf("promote: from and to are the same env %q", req.To)
	}
	if prev := previous(req.To); !req.SkipStage && prev != "" && (req.Revision != "" || req.From != prev) {
		from := req.From
		if req.Revision != "" {
			from = "revision " + req.Revision
		}
		return Plan{}, fmt.Errorf("promote: %s takes what %s runs, not %s (the promotion path is %s; --skip-stage to go around it)",
			req.To, prev, from, strings.Join(Order, " → "))
	}
	head, err := repo.Resolve(req.Branch)
	if err != nil {
		return Plan{}, fmt.Errorf("promote: branch %s: %w", req.Branch, err)
	}
	snap, err := repo.Snapshot(head)
	if err != nil {
		return Plan{}, err
	}
	to, ok, err := Read(snap.Files, req.To)
	if err != nil {
		return Plan{}, err
	}
	if !ok || !to.Pinned() {
		return Plan{}, fmt.Errorf("promote: %s is not pinned (no commit in %s): it follows %s, nothing to promote", req.To, File(req.To), req.Branch)
	}
	p := Plan{From: req.From, To: req.To, Head: head, Old: to.Revision}
	switch {
	case req.Revision != "":
		if p.New, err = repo.Resolve(req.Revision); err != nil {
			return Plan{}, fmt.Errorf("promote: %w", err) // it names the revision
		}
	default:
		from, ok, err := Read(snap.Files, req.From)
		if err != nil {
			return Plan{}, err
		}
		switch {
		case ok && from.Pinned():
			p.New = from.Revision
		case ok || req.From == Following || snap.Files["overlays/"+req.From+"/kustomization.yaml"] != nil:
			p.New = head // From follows the branch
		default:
			return Plan{}, fmt.Errorf("promote: no env %q (no %s, no overlays/%s)", req.From, File(req.From), req.From)
		}
	}
	onBranch, err := repo.IsAncestor(p.New, head)
	if err != nil {
		return Plan{}, err
	}
	if !onBranch {
		return Plan{}, fmt.Errorf("promote: %s is not on %s's history: merge it first", gitrepo.Short(p.New), req.Branch)
	}
	if p.Old != p.New {
		if _, err := repo.Resolve(p.Old); err == nil {
			p.Backwards, _ = repo.IsAncestor(p.New, p.Old)
		}
	}
	if p.Backwards && !req.Backwards {
		return Plan{}, fmt.Errorf("promote: %s would move %s back from %s to %s, an ancestor: revert the promotion commit instead, or allow it (--backwards)",
			req.From, req.To, gitrepo.Short(p.Old), gitrepo.Short(p.New))
	}
	return p, nil
}

// Promote commits the plan on the branch: To's release file gets New (and From). The commit is
// refused when To's pin moved since the plan was made (someone promoted meanwhile: make the plan
// again and look at its diff); it is a no-op when To is at New already.
func Promote(ctx context.Context, remote *gitrepo.Remote, p Plan, req Request) (gitrepo.Result, error) {
	if req.Branch == "" {
		req.Branch = "main"
	}
	if req.Author.Name == "" {
		req.Author = Bot
	}
	from := p.From
	if from == "" {
		from = "revision " + gitrepo.Short(p.New)
	}
	msg := fmt.Sprintf("promote %s → %s: %s → %s\n\n%s now runs %s (%s's release), was %s.\nRevert this commit to roll %s back.\n",
		from, p.To, gitrepo.Short(p.Old), gitrepo.Short(p.New), p.To, p.New, from, p.Old, p.To)
	if p.Backwards {
		msg = fmt.Sprintf("promote %s → %s: %s → %s (back)\n\n%s moves back to %s, an ancestor of %s.\n",
			from, p.To, gitrepo.Short(p.Old), gitrepo.Short(p.New), p.To, p.New, p.Old)
	}
	trailers := []gitrepo.Trailer{{Key: TrailerFrom, Value: p.From}, {Key: TrailerTo, Value: p.To}, {Key: TrailerRevision, Value: p.New}}
	if req.Forced != "" {
		msg += "\nForced past the violations auditor check found in it: " + req.Forced + "\n"
		for _, v := range req.ForcedMessages {
			msg += "- " + oneLine(v) + "\n"
		}
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerForced, Value: oneLine(req.Forced)},
			gitrepo.Trailer{Key: TrailerForcedPast, Value: oneLine(strings.Join(req.ForcedPast, "; "))})
	}
	branch, onto := req.Branch, ""
	if req.ReviewBranch != "" {
		branch, onto = req.ReviewBranch, req.Branch
	}
	file := File(p.To)
	res, err := remote.Update(ctx, gitrepo.UpdateRequest{
		Branch: branch, Onto: onto, Author: req.Author, Deadline: req.Deadline, Backoff: req.Backoff, Message: msg,
		Trailers: trailers,
		Change: func(snap *gitrepo.Snapshot) (map[string][]byte, error) {
			cur, ok, err := Read(snap.Files, p.To)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("promote: %s is gone at %s", file, gitrepo.Short(snap.Revision))
			}
			switch cur.Revision {
			case p.New:
				return nil, nil
			case p.Old:
			default:
				return nil, fmt.Errorf("promote: %s's pin moved to %s since the plan (was %s): look at the new diff and promote again",
					p.To, cur.Revision, gitrepo.Short(p.Old))
			}
			if moved := movedSince(req.Checked, snap, p.To); len(moved) > 0 {
				return nil, fmt.Errorf("promote: %s moved since the check (%s → %s changed %s): promote again to check what %s would run now",
					req.Branch, gitrepo.Short(req.Checked.Revision), gitrepo.Short(snap.Revision), strings.Join(moved, ", "), p.To)
			}
			out, err := Set(p.To, snap.Files[file], p.New, p.From)
			if err != nil {
				return nil, err
			}
			return map[string][]byte{file: out}, nil
		},
	})
	if err != nil {
		return res, fmt.Errorf("promote %s: %w", p.To, err)
	}
	return res, nil
}

// oneLine folds a reason onto one line, as a trailer's value must be.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ReviewBranch is the branch a promotion of to to rev is pushed to for review.
func ReviewBranch(to, rev string) string { return "promote/" + to + "-" + gitrepo.Short(rev) }

// movedSince lists the files of the branch at now that differ from the tree the promotion to env
// was checked at, but for the model ledgers (no rule reads them) and the other envs' release
// files; nil when checked is nil or now is it.
func movedSince(checked, now *gitrepo.Snapshot, env string) []string {
	if checked == nil || checked.Revision == now.Revision {
		return nil
	}
	var out []string
	for _, name := range gitrepo.Changed(checked, now) {
		if _, big := checked.Omitted[name]; big || (strings.HasPrefix(name, "clusters/") && path.Base(name) == "model-ledger.jsonl") {
			continue
		}
		if path.Base(name) == "release.yaml" && strings.HasPrefix(name, "apps/") && name != File(env) {
			continue
		}
		out = append(out, name)
	}
	return out
}
