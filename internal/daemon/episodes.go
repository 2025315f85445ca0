package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/engine/atomicfile"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

func episodesFile(cfg *Config) string { return filepath.Join(cfg.StateDir, "episodes.json") }

// loadEpisodes opens the drift history the state dir keeps (a new one the first time).
func loadEpisodes(cfg *Config) (*episode.Book, error) {
	b := episode.NewBook(cfg.Episodes.Keep, cfg.Episodes.MaxAge.Duration)
	data, err := os.ReadFile(episodesFile(cfg))
	switch {
	case os.IsNotExist(err):
		return b, nil
	case err != nil:
		return nil, fmt.Errorf("drift episodes: %w", err)
	}
	if err := json.Unmarshal(data, b); err != nil {
		return nil, fmt.Errorf("drift episodes %s: %w", episodesFile(cfg), err)
	}
	return b, nil
}

// recordEpisodes opens and ends drift episodes from one env's report and saves them when any
// did. Every replica keeps them (the leader's resolution notices read them). While Argo CD
// syncs, the report compares a half-applied revision: nothing is recorded.
func (d *Daemon) recordEpisodes(rep *drift.Report) {
	if rep.Syncing() {
		return
	}
	// The adopt walks of one report share one time limit: they run in an env's audit, and may
	// wait for the render worker behind a background render.
	deadline := time.Now().Add(adoptWalk)
	adopter := func(e episode.Episode, revision string) (*episode.Commit, bool) {
		return d.adopter(e, revision, deadline)
	}
	obs := episode.Observation{Report: rep, Live: d.liveObject, Adopter: adopter, Mask: notify.MaskSecrets}
	counts := d.lead.Leading() // every replica ends the same episodes: one observes their durations
	if s := d.sharding; s != nil {
		// Only the clusters this replica holds and this report audited: a cluster given up is
		// not "deleted", and each replica counts its own clusters' episodes.
		s.speak(rep, func(part *drift.Report, covered func(string) bool) { obs.Report, obs.Speaks = part, covered })
		counts = true
	}
	_, ended := d.episodes.Observe(obs)
	d.metrics.episodes(rep.Env, d.episodes.Open(rep.Env), ended, counts)
	if !d.episodes.TakeDirty() {
		return
	}
	for _, e := range ended {
		d.log.Info("drift episode ended", "env", e.Env, "object", e.Kind+"/"+e.Name, "field", e.Path, "how", e.End.How,
			"duration", e.Duration(e.End.At).String())
	}
	data, err := json.Marshal(d.episodes)
	if err == nil {
		err = atomicfile.Write(episodesFile(d.cfg), data)
	}
	if err != nil {
		d.log.Error("save drift episodes", "err", err)
	}
}

// EpisodesResponse is the answer of GET /api/v1/episodes: the open episodes (oldest first) and
// the most recently ended ones (newest first).
type EpisodesResponse struct {
	Open  []episode.Episode `json:"open"`
	Ended []episode.Episode `json:"ended"`
}

// serveEpisodes answers GET /api/v1/episodes[?env=ENV][&limit=N] (ended: 100 unless limit says).
func (d *Daemon) serveEpisodes(w http.ResponseWriter, r *http.Request) {
	env := r.URL.Query().Get("env")
	limit := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			http.Error(w, "limit: a number of episodes", http.StatusBadRequest)
			return
		}
		limit = n
	}
	resp := EpisodesResponse{Open: d.episodes.Open(env), Ended: d.episodes.Ended(env, limit)}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}
