package audit

import (
	"context"
	"time"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// Config is what an Auditor is made with. New applies a default to each field left unset.
type Config struct {
	// Repo is the repository audited; Live the cluster's objects, watched.
	Repo *gitrepo.Repo
	Live *live.Cache
	// Drift adjusts the comparison's options after the defaults (drift.DefaultOptions, Argo CD's
	// defaults and built-in kinds, and a random SecretKey); nil keeps the defaults.
	Drift func(*drift.Options)
	// AppNamespace holds the Applications (default argocd); AppName maps an env to its own
	// Application (default llm-<env>; "": the env has none, only its root or selection).
	AppNamespace string
	AppName      func(env string) string
	// RootName maps an env to its root Application (app-of-apps; nil: RootName): when the
	// cluster has it, the env is the group of Applications under it.
	RootName func(env string) string
	// RootManifest maps an env to its root Application's manifest in Git (nil: RootManifest; "":
	// Git holds none).
	RootManifest func(env string) string
	// Select, when set, gives an env's selection: the cluster's Applications it picks join the
	// env's group (see AppSelection). Nil, or a nil selection: the root's tree alone.
	Select func(env string) *AppSelection
	// RepoURL is the URL Argo CD reads Repo by, for an env whose root and own Application do not
	// say it: an Application of another repository is then told apart.
	RepoURL string
	// Envs, when set, are every env the cluster holds: their roots and own Applications, made by
	// hand or by another env's root, are never Extra in another env's group. The layout's envs
	// (UseLayoutFrom) join them.
	Envs []string
	// layoutEnvs are the envs of the layout UseLayoutFrom follows.
	layoutEnvs func() []string
	// Renders caches renders by what they read (default: in memory, four per env; the CLI's is
	// on disk).
	Renders *render.Cache
	// Verdicts returns the memo of an env's Argo CD verdicts: the objects its diff found in sync
	// (default: in memory; a nil memo diffs every object).
	Verdicts func(env string) *argocd.Memo
	// SyncTimeout bounds the wait for the live cache of the kinds an audit needs (default 1m):
	// a kind that cannot be listed fails that audit, naming the kind, instead of hanging it.
	SyncTimeout time.Duration
	// Timing, when set, is told how long each stage of a Run took: git (Application and
	// revisions), render, live (list and watch), schema, compare, argocd.
	Timing func(stage string, took time.Duration)
	// RenderedInBackground, when set, lets a full audit of an env that has a report already (an
	// earlier full audit) leave a render the cache cannot answer (a new revision's: minutes at
	// 10,000 objects) running in the background, when Renders has a Worker: the audit returns a
	// *RenderingError at once, and RenderedInBackground(env) is called when the render ends. The
	// env's next full audit of that revision gets it (from the cache, or from the render when the
	// cache did not keep it), or its error. A daemon keeps auditing its other envs,
	// and this env's last report stands meanwhile: comparing the cluster with the revision
	// before would report Argo CD's sync of the new one as drift.
	RenderedInBackground func(env string)
	// People, when set, holds the API server's audit events: each drifted field gets the person
	// whose write made it (drift.Field.Actor).
	People *auditlog.Store
	// RepoServer, when set, renders each Application by asking Argo CD's repo-server, with the
	// request its application controller sends: the objects compared are then the ones Argo CD
	// applies, whatever the source (Helm repositories, OCI, plugins). Nil renders in process.
	RepoServer *reposerver.Client
	// Charts fetches the charts of chart repositories Applications name (default: anonymous
	// HTTP(S)).
	Charts *render.Charts
	// MaxApplications bounds the Applications of a group one audit renders (default 1000): past
	// it, each one more is listed as not audited, with the reason.
	MaxApplications int
	// Clusters, when set, gives the live cache of an Application's destination cluster other than
	// the one Live reads (Argo CD's own, where the Applications are), and the name reports give
	// it. Its error (no credentials, unreachable) makes the Application not audited, the others
	// going on. Nil: an Application of another cluster is not audited.
	Clusters func(ctx context.Context, server, name string) (c *live.Cache, display string, err error)
	// Owns, when set, says whether this auditor audits the Applications whose destination is
	// the cluster called cluster (InCluster for Argo CD's own; a member's name as Clusters gives
	// it, or its destination when no cluster of Clusters is that): replicas that share the work
	// by cluster each audit their own. The others are left out of the report; those of other
	// clusters are not rendered, and their caches not started. Applications on Argo CD's own
	// cluster are rendered anyway, for the Applications they declare, unless Argo CD's comparison
	// of the synced revision lists none (declaresNoApplications). ClusterName names a
	// destination without starting its cache. Nil audits every Application.
	Owns        func(cluster string) bool
	ClusterName func(server, name string) (string, bool)
	// State, when set, is where incremental audits keep what they build on (default: a new one):
	// the caller owns it.
	State *State
	// Controllers, when set, gives an env's controller rules (drift.Options.Controllers): the
	// controllers whose writes to fields Git declares are not drift there. Nil: the comparison's
	// defaults for every env.
	Controllers func(env string) []drift.ControllerRule
	// Steps add to each merged report what only the caller knows (this platform's GPU cost of a
	// drift: cost.Step), in order.
	Steps []drift.Step
}

// InCluster is the name Owns gives Argo CD's own cluster, as Argo CD names it.
const InCluster = "in-cluster"
