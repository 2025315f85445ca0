package daemon

import (
	"errors"
	"sort"
	"time"

	"github.com/llm-gitops/platform/internal/drift"
)

func (d *Daemon) status() Status {
	d.mu.RLock()
	defer d.mu.RUnlock()
	st := Status{Ready: d.ready.Load(), Leader: d.leader.Load(), RenderEngine: d.renderEngine(), Timestamp: time.Now().UTC()}
	for _, env := range d.cfg.Envs {
		es := EnvStatus{Env: env}
		if rep := d.reports[env]; rep != nil {
			es.Revision, es.InSync, es.Drifted = rep.Revision, rep.InSync, len(rep.Objects)
			es.HeadRevision, es.PendingSync = rep.HeadRevision, rep.PendingSync
		}
		if err := d.errs[env]; err != nil {
			es.Error = err.Error()
		}
		if d.auditor != nil {
			es.Rendering = d.auditor.Rendering(env)
		}
		st.Envs = append(st.Envs, es)
	}
	if d.fleet != nil {
		st.Clusters = d.fleet.Status()
	}
	if s := d.sharding; s != nil {
		st.Members = s.sharder.Members()
		s.mu.RLock()
		for name := range s.owned {
			st.Shards = append(st.Shards, name)
		}
		s.mu.RUnlock()
		sort.Strings(st.Shards)
	}
	st.Git = GitStatus{LastFetch: d.lastFetch.UTC(), StaleSeconds: time.Since(d.lastFetch).Seconds()}
	if d.fetchErr != nil {
		st.Git.Error = d.fetchErr.Error()
	}
	sort.Slice(st.Envs, func(i, j int) bool { return st.Envs[i].Env < st.Envs[j].Env })
	return st
}

// Report returns the last report of env.
func (d *Daemon) Report(env string) (*drift.Report, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if rep, ok := d.reports[env]; ok {
		return rep, nil
	}
	if err := d.errs[env]; err != nil {
		return nil, err
	}
	return nil, errors.New("no audit yet")
}

// renderEngine names how the daemon renders Applications: repo-server (Argo CD's) or in-process.
func (d *Daemon) renderEngine() string {
	if d.repoServer != nil {
		return "repo-server"
	}
	return "in-process"
}
