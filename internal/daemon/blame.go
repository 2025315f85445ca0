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

	"github.com/llm-gitops/platform/internal/blame"
	"github.com/llm-gitops/platform/internal/render"
)

// blameTimeout bounds one blame walk (the HTTP server's write timeout is a minute).
const blameTimeout = 50 * time.Second

// blamer serves GET /api/v1/blame?env=&kind=&namespace=&name=[&revision=][&maxCommits=]: the
// blame.Blame of one object, the JSON `auditor blame -o json` prints. The walk starts at the
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
	res, code, err := b.blame(r.Context(), env, ref, q.Get("revision"), maxCommits)
	if err != nil {
		respondJSON(w, code, map[string]any{"error": err.Error(), "env": env})
		return
	}
	respondJSON(w, http.StatusOK, res)
}

// blame runs one walk at a time, bounded by blameTimeout, for an env the daemon audits.
func (b *blamer) blame(ctx context.Context, env string, ref blame.Ref, revision string, maxCommits int) (*blame.Blame, int, error) {
	if !slices.Contains(b.d.cfg.Envs, env) {
		return nil, http.StatusBadRequest, fmt.Errorf("env %q is not audited (envs: %s)", env, strings.Join(b.d.cfg.Envs, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, blameTimeout)
	defer cancel()
	select {
	case b.busy <- struct{}{}:
		defer func() { <-b.busy }()
	case <-ctx.Done():
		return nil, http.StatusServiceUnavailable, errors.New("another blame is running; try again")
	}
	return b.run(ctx, env, ref, revision, maxCommits)
}

// run walks the history of ref in env and adds what the cluster says; on error, the HTTP status.
func (b *blamer) run(ctx context.Context, env string, ref blame.Ref, revision string, maxCommits int) (*blame.Blame, int, error) {
	d := b.d
	d.mu.RLock()
	repo, cache, people := d.repo, d.cache, d.people
	d.mu.RUnlock()
	rep, _ := d.envs.report(env)
	if repo == nil {
		return nil, http.StatusServiceUnavailable, errors.New("the repository is not fetched yet")
	}
	if revision == "" && rep != nil {
		revision = rep.Revision
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
	res, err := blame.Git(ctx, repo, blame.Request{Env: env, Object: ref, Revision: revision, MaxCommits: maxCommits}, opts)
	var nd *blame.NotDeclaredError
	switch {
	case errors.As(err, &nd):
		return nil, http.StatusNotFound, err
	case ctx.Err() != nil:
		return nil, http.StatusServiceUnavailable, ctx.Err()
	case err != nil:
		return nil, http.StatusInternalServerError, err
	}
	if cache != nil {
		res.AddLive(cache, people, rep)
	} else {
		res.AddLive(nil, people, rep)
	}
	return res, http.StatusOK, nil
}

func respondJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
