package daemon

import (
	"sort"
	"time"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

func (d *Daemon) status() Status {
	lastFetch, fetchErr := d.git.Fetched()
	a := d.conn.Current()
	layoutErr := d.layout.headErr()
	st := Status{Ready: d.ready.Load(), Leader: d.lead.Leading(), RenderEngine: d.renderEngine(), Timestamp: time.Now().UTC()}
	for _, env := range d.cfg.Envs {
		es := EnvStatus{Env: env}
		rep, err := d.envs.report(env)
		if rep != nil {
			es.Revision, es.InSync, es.Drifted = rep.Revision, rep.InSync, len(rep.Objects)
			es.HeadRevision, es.PendingSync = rep.HeadRevision, rep.PendingSync
			for _, app := range rep.Applications {
				es.Applications = append(es.Applications, AppStatus{Name: app.Name, Cluster: app.Cluster, Renderer: app.Renderer, Error: app.Error})
			}
		}
		if err != nil {
			es.Error = err.Error()
		}
		if layoutErr != nil {
			es.LayoutError = layoutErr.Error()
		}
		if a != nil {
			es.Rendering = a.Rendering(env)
		}
		st.Envs = append(st.Envs, es)
	}
	if d.fleet != nil {
		for _, cs := range d.fleet.Status() {
			if d.owns(cs.Name) { // with shards, another replica probes the others
				st.Clusters = append(st.Clusters, cs)
			}
		}
	}
	if s := d.sharding; s != nil {
		st.Members = s.sharder.Members()
		st.Shards = s.held()
	}
	st.Git = GitStatus{LastFetch: lastFetch.UTC(), StaleSeconds: time.Since(lastFetch).Seconds()}
	if fetchErr != nil {
		st.Git.Error = fetchErr.Error()
	}
	sort.Slice(st.Envs, func(i, j int) bool { return st.Envs[i].Env < st.Envs[j].Env })
	return st
}

// Report returns the last report of env.
func (d *Daemon) Report(env string) (*drift.Report, error) { return d.envs.reportOrError(env) }

// renderEngine names how the daemon renders Applications: repo-server (Argo CD's) or in-process.
func (d *Daemon) renderEngine() string {
	if d.repoServer != nil {
		return "repo-server"
	}
	return "in-process"
}
