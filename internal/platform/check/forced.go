package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// pinFindings judges env at what it runs when the repository is at t: its pin (t itself when it
// follows the branch, or when its pin cannot be read: a release-pinned violation), with the
// repository's rules on apps/<env>.
func pinFindings(repo *gitrepo.Repo, releases *releaseSources, t *tree, env string) (render.Source, []Violation, *findings, error) {
	out := []Violation{}
	envSrc, pinErr := releases.source(t, env)
	if pinErr != nil {
		out = append(out, Violation{Rule: "release-pinned", Object: release.File(env), Message: pinErr.Error()})
		envSrc = t.src
	}
	v, err := judge(t, envSrc, env)
	if err != nil {
		return envSrc, nil, nil, fmt.Errorf("%s: %w", t.name(envSrc), err)
	}
	out = append(out, v.violations...)
	l, err := layoutOf(t.src)
	if err != nil || !l.Platform() {
		return envSrc, out, v, err
	}
	repoRules, err := repositoryRules(repo, t, env)
	if err != nil {
		return envSrc, nil, nil, fmt.Errorf("%s: %w", t.name(t.src), err)
	}
	repoRules, off := silence(l, env, repoRules)
	v.silenced = append(v.silenced, off...)
	return envSrc, append(out, repoRules...), v, nil
}

// forced is a promotion forced past the check: its reason and the violations it went past.
type forced struct {
	reason string
	past   map[string]bool // Violation.key
}

// repositoryRuleNames are the rules on the repository beside a render (repositoryRules): no
// promotion runs them, so none is forced past them.
var repositoryRuleNames = map[string]bool{"schedule": true, "ledger": true, "release-pinned": true, "release-patches": true}

// forcedPromotion finds, among the commits from brings that stop does not have (a merge's
// second parent too, as a pull request's merge ref or a merge commit), the promotion commit that
// moved env's pin to pin and nothing else, and returns what it says of being forced (nil: it
// was not).
func forcedPromotion(repo *gitrepo.Repo, from, stop, env, pin string) *forced {
	if from == "" {
		return nil
	}
	ctx := context.Background()
	before, err := repo.Log(ctx, stop)
	if err != nil {
		return nil
	}
	had := make(map[string]bool, len(before))
	for _, c := range before {
		had[c.Hash] = true
	}
	brought, err := repo.Log(ctx, from)
	if err != nil {
		return nil
	}
	for _, c := range brought {
		if had[c.Hash] {
			continue
		}
		to, _ := c.Trailer(release.TrailerTo)
		rev, _ := c.Trailer(release.TrailerRevision)
		reason, ok := c.Trailer(release.TrailerForced)
		if to != env || rev != pin || !ok || !onlyMovesPin(repo, c, env, pin) {
			continue
		}
		f := &forced{reason: reason, past: map[string]bool{}}
		named, _ := c.Trailer(release.TrailerForcedPast)
		for _, k := range strings.Split(named, ";") {
			if rule, object, ok := strings.Cut(strings.TrimSpace(k), " "); ok && !repositoryRuleNames[rule] {
				f.past[Violation{Rule: rule, Object: object}.key()] = true
			}
		}
		return f
	}
	return nil
}

// onlyMovesPin says commit c changes env's release file alone, to pin: what auditor promote
// writes, and no other change under its name.
func onlyMovesPin(repo *gitrepo.Repo, c gitrepo.Commit, env, pin string) bool {
	if len(c.Parents) != 1 {
		return false
	}
	after, err := repo.Snapshot(c.Hash)
	if err != nil {
		return false
	}
	before, err := repo.Snapshot(c.Parents[0])
	if err != nil {
		return false
	}
	changed := gitrepo.Changed(before, after)
	if len(changed) != 1 || changed[0] != release.File(env) {
		return false
	}
	r, err := release.Parse(env, after.Files[release.File(env)])
	return err == nil && r.Revision == pin
}

// forgive moves the violations a forced promotion named from Violations to Forced.
func (e *EnvResult) forgive(f *forced) {
	if f == nil {
		return
	}
	var still []Violation
	for _, v := range e.Violations {
		if f.past[v.key()] {
			e.Forced = append(e.Forced, v)
		} else {
			still = append(still, v)
		}
	}
	if len(e.Forced) > 0 {
		e.Violations, e.ForcedReason = append([]Violation{}, still...), f.reason
	}
}

// common is the violations in both a and b (each as many times as in both).
func common(a, b []Violation) []Violation {
	count := map[string]int{}
	for _, v := range b {
		count[v.fullKey()]++
	}
	var out []Violation
	for _, v := range a {
		if count[v.fullKey()] > 0 {
			count[v.fullKey()]--
			out = append(out, v)
		}
	}
	return out
}

// split divides found into the violations not in known (introduced) and those known already
// (inherited), matching each known one once. A violation is the same when its rule, object and
// message are: one that got worse, or better without being cleared, on the same object is new.
func split(found, known []Violation) (introduced, inherited []Violation) {
	count := map[string]int{}
	for _, k := range known {
		count[k.fullKey()]++
	}
	introduced = []Violation{}
	for _, v := range found {
		if count[v.fullKey()] > 0 {
			count[v.fullKey()]--
			inherited = append(inherited, v)
			continue
		}
		introduced = append(introduced, v)
	}
	return introduced, inherited
}
