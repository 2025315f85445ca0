package daemon

import (
	"time"

	"github.com/llm-gitops/platform/internal/daemon/fleet"
)

// Status is the daemon's state for GET /api/v1/status.
type Status struct {
	Ready  bool              `json:"ready"`
	Leader bool              `json:"leader"`
	Envs   []EnvStatus       `json:"envs"`
	Git    GitStatus         `json:"git"`
	Sinks  map[string]string `json:"sinks,omitempty"`
	// RenderEngine says how Applications are rendered: repo-server (Argo CD's) or in-process.
	RenderEngine string `json:"renderEngine"`
	// Clusters are the clusters besides Argo CD's own, each reachable or not: with shards, those
	// this replica audits (and probes).
	Clusters []fleet.Status `json:"clusters,omitempty"`
	// Shards are the clusters this replica audits and posts for, and Members the replicas that
	// share the work, when they do.
	Shards    []string  `json:"shards,omitempty"`
	Members   []string  `json:"members,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// EnvStatus is one env's last audit. Revision is the commit audited: the one Argo CD synced when
// the env has an Application, else the env's release pin or branch head. HeadRevision, when it
// differs, is what Git says the env should run (the Application's target branch head, or the
// pin): a commit not synced yet, PendingSync when it descends from Revision. Rendering is the
// revision the env's next full audit is rendering in the background: the report is Revision's
// until that render is in.
type EnvStatus struct {
	Env          string `json:"env"`
	Revision     string `json:"revision,omitempty"`
	HeadRevision string `json:"headRevision,omitempty"`
	PendingSync  bool   `json:"pendingSync,omitempty"`
	Rendering    string `json:"rendering,omitempty"`
	InSync       bool   `json:"inSync"`
	Drifted      int    `json:"driftedObjects"`
	Error        string `json:"error,omitempty"`
	// LayoutError says why the repository's layout at the branch head is not used (it does not
	// parse, or moves the envs to another namespace): the audits use the last good one, or fail
	// with this error while there is none.
	LayoutError string `json:"layoutError,omitempty"`
	// Applications are the env's Applications in its last report, each with the engine that
	// rendered it.
	Applications []AppStatus `json:"applications,omitempty"`
}

// AppStatus is one Application of an env's last report: which engine rendered it
// (drift.Application.Renderer), or why it was not audited.
type AppStatus struct {
	Name     string `json:"name"`
	Cluster  string `json:"cluster,omitempty"`
	Renderer string `json:"renderer,omitempty"`
	Error    string `json:"error,omitempty"`
}

// GitStatus says how fresh the audited Git state is.
type GitStatus struct {
	LastFetch    time.Time `json:"lastFetch"`
	StaleSeconds float64   `json:"staleSeconds"`
	Error        string    `json:"error,omitempty"`
}
