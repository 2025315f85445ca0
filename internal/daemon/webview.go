package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/webview"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/platform/ledger"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// pages adapts the daemon to the web view. What it renders from Git (the models served, the
// schedule) is kept per revision: a page load renders an env once per new revision.
type pages struct {
	d     *Daemon
	blame *blamer

	mu      sync.Mutex
	serving map[string]servingAt // env → at the audited revision
	plans   map[string]planAt    // env → at the branch head
}

type servingAt struct {
	revision string
	serving  []ledger.Serving
	err      error
}

type planAt struct {
	revision string
	sched    *schedule.Schedule
	err      error
}

func newPages(d *Daemon, b *blamer) *pages {
	return &pages{d: d, blame: b, serving: map[string]servingAt{}, plans: map[string]planAt{}}
}

func (p *pages) Envs() []string { return p.d.cfg.Envs }

func (p *pages) Revision(env string) (string, error) {
	return p.d.envs.revision(env)
}

func (p *pages) Open(env string) []episode.Episode { return p.d.episodes.Open(env) }

func (p *pages) Ended(env string, n int) []episode.Episode { return p.d.episodes.Ended(env, n) }

func (p *pages) Serving(env string) ([]ledger.Serving, error) {
	rev, _ := p.Revision(env)
	repo := p.d.git.Repo()
	if rev == "" || repo == nil {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.serving[env]; ok && s.revision == rev {
		return s.serving, s.err
	}
	st, err := ledger.StateAtCached(context.Background(), repo, env, rev, p.d.ledger)
	s := servingAt{revision: rev, err: err}
	if err == nil {
		s.serving = st.Sorted()
	}
	p.serving[env] = s
	return s.serving, s.err
}

func (p *pages) Upcoming(env string, n int) ([]webview.ScaleUp, error) {
	repo := p.d.git.Repo()
	if repo == nil {
		return nil, nil
	}
	head, err := repo.Resolve("")
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	plan, ok := p.plans[env]
	if !ok || plan.revision != head {
		plan = planAt{revision: head}
		snap, err := repo.Snapshot(head)
		if err == nil {
			plan.sched, err = schedule.Load(snap, env)
		}
		if errors.Is(err, schedule.ErrNoSchedule) {
			err = nil
		}
		plan.err = err
		p.plans[env] = plan
	}
	p.mu.Unlock()
	if plan.err != nil || plan.sched == nil {
		return nil, plan.err
	}
	var out []webview.ScaleUp
	for _, f := range plan.sched.Plan(time.Now(), n) {
		t := f.Peak.Target
		out = append(out, webview.ScaleUp{Peak: f.Peak.Name, FireTime: f.FireTime, Start: f.Start,
			Targets: fmt.Sprintf("%s/%s %s → %d", t.Kind, t.Name, t.Field, f.Peak.Warm)})
	}
	return out, nil
}

func (p *pages) Blame(ctx context.Context, env, cluster, kind, namespace, name string) (*blame.Blame, error) {
	ref, err := blame.ParseRef(kind+"/"+name, namespace)
	if err != nil {
		return nil, err
	}
	res, _, err := p.blame.blame(ctx, blameAsk{env: env, cluster: cluster, ref: ref})
	return res, err
}
