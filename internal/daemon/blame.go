package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// blameTimeout bounds one blame walk (the HTTP server's write timeout is a minute).
const blameTimeout = 50 * time.Second

// blamer serves GET /api/v1/blame?env=&kind=&namespace=&name=[&cluster=][&revision=][&maxCommits=]:
// the blame.Blame of one object, the JSON `auditor blame -o json` prints. cluster names a cluster
// of the clusters config: the live object, its drift and its writes are then that cluster's. The walk starts at the
// revision of the env's last audit (the one Argo CD synced) unless revision says otherwise; the
// drift is that audit's, the writes the audit events the daemon holds. One walk runs at a time,
// with a render cache of its own: the audits' cache keeps the synced revisions.
type blamer struct {
	d       *Daemon
	renders *render.Cache
	busy    chan struct{}
}

func (d *Daemon) blameHandler() *blamer {
	return &blamer{d: d, renders: d.renderCache(4), busy: make(chan struct{}, 1)}
}

func (b *blamer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	envs := b.d.cfg.Envs
	env := q.Get("env")
	if env == "" && len(envs) == 1 {
		env = envs[0]
	}
	if !slices.Contains(envs, env) {
		respondJSON(w, http.StatusBadRequest, map[string]any{"error": "?env= must name an audited env", "envs": envs})
		return
	}
	if q.Get("kind") == "" || q.Get("name") == "" {
		respondJSON(w, http.StatusBadRequest, map[string]any{"error": "?kind= and ?name= are required (?namespace= when the name is not unique)"})
		return
	}
	ref, err := blame.ParseRef(q.Get("kind")+"/"+q.Get("name"), q.Get("namespace"))
	if err != nil {
		respondJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	maxCommits := 0
	if s := q.Get("maxCommits"); s != "" {
		if maxCommits, err = strconv.Atoi(s); err != nil || maxCommits < 1 {
			respondJSON(w, http.StatusBadRequest, map[string]any{"error": "?maxCommits= is a number of commits"})
			return
		}
	}
	res, code, err := b.blame(r.Context(), blameAsk{env: env, cluster: q.Get("cluster"), ref: ref, revision: q.Get("revision"), maxCommits: maxCommits})
	if err != nil {
		respondJSON(w, code, map[string]any{"error": err.Error(), "env": env})
		return
	}
	respondJSON(w, http.StatusOK, res)
}

// blameAsk is one blame asked for: the object ref of env, live on cluster ("" for Argo CD's own),
// walked from revision ("": the env's audited one) at most maxCommits back (0: the default).
type blameAsk struct {
	env, cluster string
	ref          blame.Ref
	revision     string
	maxCommits   int
}

// blame runs one walk at a time, bounded by blameTimeout, for an env the daemon audits.
func (b *blamer) blame(ctx context.Context, ask blameAsk) (*blame.Blame, int, error) {
	if !slices.Contains(b.d.cfg.Envs, ask.env) {
		return nil, http.StatusBadRequest, fmt.Errorf("env %q is not audited (envs: %s)", ask.env, strings.Join(b.d.cfg.Envs, ", "))
	}
	if ask.cluster != "" && !slices.ContainsFunc(b.d.cfg.Clusters, func(c fleet.Cluster) bool { return c.Name == ask.cluster }) {
		names := make([]string, len(b.d.cfg.Clusters))
		for i, c := range b.d.cfg.Clusters {
			names[i] = c.Name
		}
		return nil, http.StatusBadRequest, fmt.Errorf("cluster %q is not in the clusters config (clusters: %s; none for Argo CD's own)", ask.cluster, strings.Join(names, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, blameTimeout)
	defer cancel()
	select {
	case b.busy <- struct{}{}:
		defer func() { <-b.busy }()
	case <-ctx.Done():
		return nil, http.StatusServiceUnavailable, errors.New("another blame is running; try again")
	}
	return b.run(ctx, ask)
}

// run walks the history of the object asked for and adds what its cluster says; on error, the
// HTTP status.
func (b *blamer) run(ctx context.Context, ask blameAsk) (*blame.Blame, int, error) {
	d := b.d
	repo, people := d.git.Repo(), d.people
	cache, unread := d.conn.Cache(), ""
	if ask.cluster != "" {
		cache = nil
		if d.fleet != nil {
			cache = d.fleet.Caches()[ask.cluster]
		}
		if cache == nil {
			// Started by the audits alone: a replica that does not audit the cluster (another
			// holds its shard), or not yet, has none, and blame does not start one.
			unread = fmt.Sprintf("the live state of cluster %s is not read: this replica has no cache of it (another replica audits it, or it was not reached yet)", ask.cluster)
		}
	}
	rep, _ := d.envs.report(ask.env)
	if repo == nil {
		return nil, http.StatusServiceUnavailable, errors.New("the repository is not fetched yet")
	}
	revision := ask.revision
	if revision == "" && rep != nil {
		revision = rep.Revision
		if app, ok := auditedUnder(rep, ask); ok && app.Revision != "" {
			if rev, err := repo.Resolve(app.Revision); err == nil && rev == app.Revision {
				revision = app.Revision // its Application's synced commit, when it is not the env's
			}
		}
	} else if revision != "" {
		rev, err := repo.Resolve(revision)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		revision = rev
	}
	opts := blame.Options{Renders: b.renders}
	if cache != nil {
		opts.Types = blame.ClusterTypes(ctx, cache)
	}
	req := blame.Request{Env: ask.env, Object: ask.ref, Revision: revision, MaxCommits: ask.maxCommits, Applications: groupPaths(rep, ask)}
	res, err := blame.Git(ctx, repo, req, opts)
	var nd *blame.NotDeclaredError
	switch {
	case errors.As(err, &nd):
		return nil, http.StatusNotFound, err
	case ctx.Err() != nil:
		return nil, http.StatusServiceUnavailable, ctx.Err()
	case err != nil:
		return nil, http.StatusInternalServerError, err
	}
	res.Cluster = ask.cluster
	if cache != nil {
		res.AddLive(cache, people, rep)
	} else {
		res.AddLive(nil, people, rep)
	}
	if unread != "" {
		res.Notes = append(res.Notes, unread)
	}
	return res, http.StatusOK, nil
}

// groupPaths are the paths the env's Applications render, as its last audit found them, for a
// walk of an object Git's own layout does not declare (a root elsewhere, a selection): first the
// Application the report lists the object under, then the others on the cluster asked about.
// A path this repository lacks (a chart's, another repository's) renders nothing and is passed
// over; another repository's path that this one has too is walked here, and found only if it
// declares the object.
func groupPaths(rep *drift.Report, ask blameAsk) []blame.AppPath {
	if rep == nil {
		return nil
	}
	var out []blame.AppPath
	if a, ok := auditedUnder(rep, ask); ok {
		out = append(out, blame.AppPath{Name: a.Name, Path: a.Path, Namespace: ask.ref.Namespace})
	}
	for _, a := range rep.Applications {
		if a.Cluster == ask.cluster && a.Path != "" && a.Error == "" && !strings.HasPrefix(a.Path, "chart ") {
			out = append(out, blame.AppPath{Name: a.Name, Path: a.Path})
		}
	}
	return out
}

// auditedUnder is the Application rep lists the object asked about under, when it drifted and
// its Application renders a path of this repository (not a chart, not another repository's).
func auditedUnder(rep *drift.Report, ask blameAsk) (drift.Application, bool) {
	for _, o := range rep.Objects {
		if o.Cluster != ask.cluster || o.Name != ask.ref.Name || !strings.EqualFold(o.Kind, ask.ref.Kind) ||
			ask.ref.Namespace != "" && o.Namespace != ask.ref.Namespace {
			continue
		}
		for _, a := range rep.Applications {
			if a.Name == o.Application && a.Path != "" && o.Source == a.Path && !strings.HasPrefix(a.Path, "chart ") {
				return a, true
			}
		}
	}
	return drift.Application{}, false
}

func respondJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
