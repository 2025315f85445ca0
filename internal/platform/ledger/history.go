package ledger

import (
	"context"
	"fmt"
	"path"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// WatchedPaths are the paths whose changes can change what env serves.
func WatchedPaths(env string) []string {
	// apps/<env>: its release file (the pin) and its Application (kustomize patches).
	return []string{render.OverlayPath(env), "base", "components", path.Join("apps", env)}
}

// StateAt renders env as it runs when the repository is at rev — at its pinned commit
// (apps/<env>/release.yaml) when it has one, else at rev — and returns what it serves (empty when
// the overlay does not exist there).
func StateAt(repo *gitrepo.Repo, env, rev string) (State, error) {
	return StateAtCached(context.Background(), repo, env, rev, nil)
}

// StateAtCached is StateAt rendering through renders: its cache, and its Worker's child process
// (a long-running process keeps kustomize's working set out of its heap); cancelling ctx stops a
// running render. A nil renders renders in process, uncached.
func StateAtCached(ctx context.Context, repo *gitrepo.Repo, env, rev string, renders *render.Cache) (State, error) {
	st, _, err := stateAt(ctx, repo, env, rev, renders)
	return st, err
}

// stateAt is StateAtCached, also returning the commit env's overlay was rendered at.
func stateAt(ctx context.Context, repo *gitrepo.Repo, env, rev string, renders *render.Cache) (State, string, error) {
	runs, err := release.At(repo, env, rev)
	if err != nil {
		return nil, "", err
	}
	snap, err := repo.Snapshot(runs.Revision)
	if err != nil {
		return nil, "", err
	}
	st, err := stateOf(ctx, snap, env, runs.Patches, renders)
	return st, runs.Revision, err
}

// stateOf renders env from snap with its Application's kustomize patches (the runtime knobs, such
// as a scheduled scale-up's replica floor) and returns what it serves.
func stateOf(ctx context.Context, snap *gitrepo.Snapshot, env string, patches []render.Patch, renders *render.Cache) (State, error) {
	if _, ok := snap.Files[render.OverlayPath(env)+"/kustomization.yaml"]; !ok {
		return State{}, nil
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return nil, err
	}
	if src, err = src.WithPatches(env, patches); err != nil {
		return nil, fmt.Errorf("revision %s: %w", snap.Revision, err)
	}
	res, err := render.Engine{Cache: renders}.Render(ctx, src, render.Target{Name: env})
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", snap.Revision, err)
	}
	return ServedState(res.Objects), nil
}

// Rebuild reconstructs the ledger of env from history alone: the first-parent commits up to HEAD
// (main for a clone) that touched overlays/<env>, base/ or components/, oldest first, each
// rendered and its served state compared with the previous one. Reverts (by Remote.Revert or
// the git CLI) give rollback records. SyncedAt and Metrics stay empty.
func Rebuild(ctx context.Context, repo *gitrepo.Repo, env string) ([]Record, error) {
	return Records(ctx, repo, env, "", "")
}

// Records returns the records of the commits after from (exclusive; "" = from the beginning)
// up to to (inclusive; "" = HEAD or main), as Rebuild does. When from is not on to's first-parent
// chain, the whole history up to to is used.
func Records(ctx context.Context, repo *gitrepo.Repo, env, from, to string) ([]Record, error) {
	return records(ctx, repo, env, from, to, nil)
}

// records is Records rendering through renders (nil: in process, uncached).
func records(ctx context.Context, repo *gitrepo.Repo, env, from, to string, renders *render.Cache) ([]Record, error) {
	head, err := repo.Resolve(to)
	if err != nil {
		return nil, err
	}
	all, err := repo.Log(ctx, head)
	if err != nil {
		return nil, err
	}
	byHash := make(map[string]gitrepo.Commit, len(all))
	for _, c := range all {
		byHash[c.Hash] = c
	}
	if from != "" {
		if from, err = repo.Resolve(from); err != nil {
			return nil, err
		}
	}
	// First-parent chain, newest first, stopping at from.
	var chain []gitrepo.Commit
	found := from == ""
	for h := head; h != ""; {
		if h == from {
			found = true
			break
		}
		c, ok := byHash[h]
		if !ok {
			return nil, fmt.Errorf("commit %s missing from the history of %s", h, head)
		}
		chain = append(chain, c)
		h = ""
		if len(c.Parents) > 0 {
			h = c.Parents[0]
		}
	}
	prev := State{}
	if !found { // from is not an ancestor: start over
		from = ""
	} else if from != "" {
		if prev, err = StateAtCached(ctx, repo, env, from, renders); err != nil {
			return nil, err
		}
	}
	touched, err := repo.Log(ctx, head, WatchedPaths(env)...)
	if err != nil {
		return nil, err
	}
	isTouched := make(map[string]bool, len(touched))
	for _, c := range touched {
		isTouched[c.Hash] = true
	}
	var out []Record
	for i := len(chain) - 1; i >= 0; i-- {
		c := chain[i]
		// A merge is rendered too: git log lists it only when it differs from every parent, but
		// on the first-parent chain it brings in its second parent's changes.
		if !isTouched[c.Hash] && len(c.Parents) < 2 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next, pin, err := stateAt(ctx, repo, env, c.Hash, renders)
		if err != nil {
			return nil, err
		}
		recs := commitRecords(env, c, prev, next)
		forced := forcedReason(c, byHash, env, pin)
		for i := range recs {
			if pin != c.Hash {
				recs[i].Release = pin
			}
			recs[i].Forced = forced
		}
		out = append(out, recs...)
		prev = next
	}
	return out, nil
}

// forcedReason is the reason a promotion of env to pin past the check's violations gave (its
// Promote-Forced trailer): on c itself, or, for a merge, on that promotion's commit it brings in
// from a review branch (its second parent, or a first parent of it a reviewer added commits on).
func forcedReason(c gitrepo.Commit, byHash map[string]gitrepo.Commit, env, pin string) string {
	promotes := func(p gitrepo.Commit) bool {
		to, _ := p.Trailer(release.TrailerTo)
		rev, _ := p.Trailer(release.TrailerRevision)
		return to == env && rev == pin
	}
	if promotes(c) {
		v, _ := c.Trailer(release.TrailerForced)
		return v
	}
	if len(c.Parents) < 2 {
		return ""
	}
	h := c.Parents[1]
	for range 20 {
		p, ok := byHash[h]
		if !ok {
			return ""
		}
		if promotes(p) {
			v, _ := p.Trailer(release.TrailerForced)
			return v
		}
		if len(p.Parents) == 0 {
			return ""
		}
		h = p.Parents[0]
	}
	return ""
}

// commitRecords turns the change prev → next made by commit c into records.
func commitRecords(env string, c gitrepo.Commit, prev, next State) []Record {
	reverted, isRevert := gitrepo.IsRevert(c)
	var out []Record
	for _, d := range diffState(prev, next) {
		s := d.s
		r := Record{
			Kind: d.kind, Changes: d.changes,
			Env: env, Model: s.Model, Deployment: s.Deployment, Namespace: s.Namespace, Version: s.Version,
			WeightsURI: s.WeightsURI, WeightsRevision: s.WeightsRevision, Image: s.Image,
			SharePercent: s.SharePercent, Replicas: s.Replicas, Cost: s.Cost,
			Revision: c.Hash, Overlay: render.OverlayPath(env),
			Author: c.Author.Name + " <" + c.Author.Email + ">", Subject: c.Subject,
			CommittedAt: c.Committer.When.UTC(),
		}
		if d.kind == KindRetired {
			r.SharePercent, r.Replicas = 0, 0
		}
		if isRevert {
			r.Effect, r.Kind, r.Reverts = d.kind, KindRollback, reverted
		}
		r.ID = ID(env, r.Model, r.Deployment, r.Version, r.Revision)
		out = append(out, r)
	}
	return out
}
